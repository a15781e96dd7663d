package corpus

import (
	"fmt"
	"strings"
	"time"
)

// The calendar server: a team calendar API. Its workflow: look at a day,
// maybe find a free slot, create a meeting, invite people.

const calendarTools = `[
{"name":"list_events","description":"List the events of a calendar between two instants (RFC 3339 timestamps with offset).","inputSchema":{"type":"object","properties":{"calendar_id":{"type":"string","description":"the owner's e-mail address"},"time_min":{"type":"string","format":"date-time"},"time_max":{"type":"string","format":"date-time"}},"required":["calendar_id","time_min","time_max"]}},
{"name":"find_free_slot","description":"Find start times on a day when all attendees are free.","inputSchema":{"type":"object","properties":{"attendees":{"type":"array","items":{"type":"string","format":"email"}},"date":{"type":"string","format":"date"},"duration_minutes":{"type":"integer","enum":[15,30,45,60,90]}},"required":["attendees","date","duration_minutes"]}},
{"name":"create_event","description":"Create an event. start is the day (YYYY-MM-DD), start_time the local time (HH:MM).","inputSchema":{"type":"object","properties":{"calendar_id":{"type":"string"},"title":{"type":"string"},"start":{"type":"string"},"start_time":{"type":"string","pattern":"^[0-2][0-9]:[0-5][0-9]$"},"duration_minutes":{"type":"integer","minimum":5,"maximum":480},"time_zone":{"type":"string","enum":["UTC","Europe/London","Europe/Berlin","America/New_York","Asia/Tokyo"]},"description":{"type":"string"}},"required":["calendar_id","title","start","start_time","duration_minutes"]}},
{"name":"invite","description":"Invite people to an event; they receive an e-mail invitation.","inputSchema":{"type":"object","properties":{"event_id":{"type":"string"},"attendees":{"type":"array","items":{"type":"string","format":"email"},"minItems":1},"message":{"type":"string"}},"required":["event_id","attendees"]}},
{"name":"cancel_event","description":"Cancel an event and optionally notify its attendees.","inputSchema":{"type":"object","properties":{"event_id":{"type":"string"},"notify":{"type":"boolean","default":true}},"required":["event_id"]}},
{"name":"list_calendars","description":"List the calendars the caller can read: their ids and names.","inputSchema":{"type":"object","properties":{}}},
{"name":"think","description":"Use this tool to think. It changes nothing and returns nothing.","inputSchema":{"type":"object","properties":{"thought":{"type":"string"}},"required":["thought"]}}
]`

var meetingKinds = []string{"Kick-off", "Quarterly review", "Design review", "Vendor call", "Onboarding session", "Budget check-in", "Retro", "Interview loop debrief"}
var busyTitles = []string{"Team standup", "Focus time", "Lunch", "1:1", "All hands", "Dentist"}
var teamNames = []string{"Design", "Platform", "Sales", "Support", "Finance", "Research", "Legal", "Data"}
var timeZones = []string{"UTC", "Europe/London", "Europe/Berlin", "America/New_York", "Asia/Tokyo"}

func (t *task) newEventID() string {
	return t.g.fresh(func() string { return "evt_" + t.g.hex(12) })
}

func (t *task) calendarFlow(specs map[string]bool) {
	g := t.g
	owner := g.person()
	var guests []person
	var emails []any
	for range g.between(1, 3) {
		p := g.person()
		guests = append(guests, p)
		emails = append(emails, p.email)
	}
	day := g.eventDate()
	iso := day.Format(time.DateOnly)

	// What is on the day already.
	var busy []map[string]any
	for i := range g.between(0, 3) {
		h := 8 + 3*i + g.between(0, 2)
		busy = append(busy, map[string]any{"event_id": t.newEventID(), "title": g.pick(busyTitles),
			"start": fmt.Sprintf("%sT%02d:00:00Z", iso, h), "end": fmt.Sprintf("%sT%02d:30:00Z", iso, h)})
	}
	events := map[string]any{"calendar_id": owner.email, "events": busy}
	if busy == nil {
		events["events"] = []any{}
	}
	good := map[string]any{"calendar_id": owner.email, "time_min": iso + "T00:00:00Z", "time_max": iso + "T23:59:59Z"}
	switch {
	case specs[ClassCalendarNotFound]:
		// The agent guesses a team calendar's id from its name; the API
		// answers with a JSON error body naming the guess, and the agent
		// lists the calendars to find the real id.
		team := g.pick(teamNames)
		guess := g.fresh(func() string { return strings.ToLower(team) + "-team-" + g.hex(3) })
		id := g.fresh(func() string { return "cal_" + g.hex(10) })
		other := g.fresh(func() string { return "cal_" + g.hex(10) })
		bad := map[string]any{"calendar_id": guess, "time_min": good["time_min"], "time_max": good["time_max"]}
		f := t.fail("calendar", "list_events", bad,
			fmt.Sprintf(`{"error":{"code":404,"message":"Calendar not found: %s","status":"NOT_FOUND","details":[{"reason":"notFound","domain":"calendar"}]}}`, guess))
		t.ok("calendar", "list_calendars", map[string]any{}, map[string]any{"calendars": []map[string]any{
			{"calendar_id": owner.email, "summary": owner.name()},
			{"calendar_id": id, "summary": team + " team"},
			{"calendar_id": other, "summary": g.pick(teamNames) + " on-call"}}})
		good["calendar_id"], events["calendar_id"] = id, id
		s := t.ok("calendar", "list_events", good, events)
		if g.chance(0.5) {
			s.thought = "Calendar ids are not names; take the id from the list."
		}
		t.episode(ClassCalendarNotFound, s, f)
	case specs[ClassTimeFormat]:
		bad := map[string]any{"calendar_id": owner.email, "time_min": iso + "T00:00", "time_max": iso + "T23:59"}
		f := t.rpcFail("calendar", "list_events", bad, -32602,
			fmt.Sprintf("Invalid params: time_min '%sT00:00' is not an RFC 3339 timestamp (e.g. %sT00:00:00Z)", iso, iso))
		s := t.ok("calendar", "list_events", good, events)
		if g.chance(0.5) {
			s.thought = "It wants full RFC 3339 timestamps with seconds and a zone."
		}
		t.episode(ClassTimeFormat, s, f)
	default:
		t.do("calendar", "list_events", good, events)
	}

	duration := g.pick([]string{"30", "45", "60"})
	startTime := fmt.Sprintf("%02d:%s", g.between(9, 16), g.pick([]string{"00", "30"}))
	if g.chance(0.6) {
		t.do("calendar", "find_free_slot", map[string]any{"attendees": emails, "date": iso, "duration_minutes": mustAtoi(duration)},
			map[string]any{"date": iso, "slots": []string{"08:" + g.pick([]string{"00", "30"}), startTime, "17:" + g.pick([]string{"00", "15", "30"})}})
	}

	kind := g.pick(meetingKinds)
	title := kind + " with " + guests[0].name()
	tz := g.pick(timeZones)
	args := map[string]any{"calendar_id": owner.email, "title": title, "start": iso, "start_time": startTime,
		"duration_minutes": mustAtoi(duration), "time_zone": tz}
	evt := t.newEventID()
	res := map[string]any{"event_id": evt, "start": iso + "T" + startTime + ":00", "time_zone": tz,
		"html_link": "https://calendar.example.com/event/" + evt}
	if specs[ClassDateFormat] {
		bad := day.Format("01/02/2006")
		if g.chance(0.4) {
			bad = day.Format("02.01.2006")
		}
		badArgs := map[string]any{"calendar_id": owner.email, "title": title, "start": bad, "start_time": startTime,
			"duration_minutes": mustAtoi(duration), "time_zone": tz}
		if g.dateEpisodes++; g.dateEpisodes%2 == 0 {
			// Every second time, the agent rewrites the whole request while fixing the date:
			// the retry differs in several arguments, only one of which
			// mattered.
			delete(badArgs, "time_zone")
			badArgs["duration_minutes"] = 60
			badArgs["title"] = kind
			args["description"] = fmt.Sprintf("%s. Agenda to follow from %s.", title, owner.first)
			if duration == "60" {
				args["duration_minutes"] = 45
			}
		}
		f := t.fail("calendar", "create_event", badArgs, fmt.Sprintf("invalid start '%s': expected YYYY-MM-DD", bad))
		s := t.ok("calendar", "create_event", args, res)
		if g.chance(0.5) {
			s.thought = fmt.Sprintf("The calendar wants ISO dates, so %s.", iso)
		}
		t.episode(ClassDateFormat, s, f)
	} else {
		t.ok("calendar", "create_event", args, res)
	}

	msg := fmt.Sprintf("%s would like to meet on %s at %s (%s).", owner.name(), day.Format("Monday 2 January"), startTime, tz)
	t.do("calendar", "invite", map[string]any{"event_id": evt, "attendees": emails, "message": msg},
		map[string]any{"event_id": evt, "invited": emails, "pending": len(emails)})

	if len(busy) > 0 && g.chance(0.3) {
		old := busy[0]["event_id"].(string)
		t.do("calendar", "cancel_event", map[string]any{"event_id": old, "notify": true}, map[string]any{"event_id": old, "status": "cancelled"})
	}
}
