package benchset

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode"

	"github.com/hindsight-proxy/hindsight"
)

// The hard-negative set (hard-experiences.jsonl, hard-queries.jsonl) is
// built in groups. A group is one tool in one situation (a project and
// what the agent was doing there, e.g. refunding a returned item of a
// multi-item order in the storefront-api project) with one experience per
// error that tool can raise: its hard negatives share the tool and the
// situation sentence word for word and differ only in the error and the
// lesson ("missing required argument: currency" against "currency EUR does
// not match the charge currency USD" against "refund amount 120.00 exceeds
// captured amount 99.50"). Several errors of a tool share an error code,
// and some errors occur on several tools, so filters on tool and error code
// leave hard negatives in place. Every tool appears in several groups, so
// each error also appears in other situations.
//
// Queries are phrased as an agent would report the failure: a sentence of
// situation (naming the project; in half the queries the experiences'
// wording, in the other half a paraphrase), the call with its arguments
// (whose names are words of other errors: amount, currency, price…) and
// the error text with other variable values (another amount, id or
// currency). Two queries in three
// carry ErrorTemplate, masked from the query's error text as the sidecar
// does (Mask); experiences carry a template written with every variable
// part masked, so matching it needs the wildcard on either side (a query's
// unquoted currency code stays literal). The domain is payments, shipping
// and inventory.

// hardError is an error a tool can raise.
type hardError struct {
	code   string
	format string // the error text; %s verbs take vals' values in order
	vals   []func(r *rand.Rand) string
	tmpl   string // the error template, every variable part masked
	lesson string
}

type hardTool struct {
	server, name, taskType string
	// situations are what the agent was doing: the experience's wording
	// and the query's paraphrase, with %s for the project.
	situations [][2]string
	// args are the call's arguments as an agent reports them; an error
	// "missing required argument: X" leaves X out.
	args   []hardArg
	errors []hardError
}

type hardArg struct {
	name string
	val  func(r *rand.Rand) string
}

// Value generators for the errors' variable parts.
func amount(r *rand.Rand) string { return fmt.Sprintf("%d.%02d", 5+r.IntN(900), r.IntN(100)) }
func small(r *rand.Rand) string  { return fmt.Sprint(2 + r.IntN(60)) }
func currency(r *rand.Rand) string {
	return []string{"EUR", "USD", "GBP", "JPY", "CHF", "SEK", "CAD", "AUD"}[r.IntN(8)]
}

func prefixed(p string) func(r *rand.Rand) string {
	const alnum = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"
	return func(r *rand.Rand) string {
		b := []byte(p)
		b = append(b, byte('1'+r.IntN(9)))
		for range 9 {
			b = append(b, alnum[r.IntN(len(alnum))])
		}
		return string(b)
	}
}

func oneOf(xs ...string) func(r *rand.Rand) string {
	return func(r *rand.Rand) string { return xs[r.IntN(len(xs))] }
}

func number(lo, hi int) func(r *rand.Rand) string {
	return func(r *rand.Rand) string { return fmt.Sprint(lo + r.IntN(hi-lo)) }
}

var (
	chargeID = prefixed("ch_")
	authID   = prefixed("auth_")
	pmID     = prefixed("pm_")
	cusID    = prefixed("cus_")
	priceID  = prefixed("price_")
	acctID   = prefixed("ca_")
	skuID    = prefixed("SKU-")
	resID    = prefixed("res_")
	whID     = oneOf("WH-BER-2", "WH-RTM-1", "WH-DAL-4", "WH-LYS-3", "WH-OSA-7")
	orderNo  = number(10000, 99999)
	postcode = number(10000, 99999)
	city     = oneOf("Oakland", "Leipzig", "Lyon", "Porto", "Gdansk", "Tucson", "Malmo", "Utrecht")
	service  = oneOf("overnight", "express_saver", "ground_economy", "two_day")
	dims     = func(r *rand.Rand) string { return fmt.Sprintf("%dx%dx%d", 40+r.IntN(80), 30+r.IntN(60), 20+r.IntN(60)) }
	date     = func(r *rand.Rand) string { return fmt.Sprintf("2026-12-%02d", 1+r.IntN(28)) }
	clock    = func(r *rand.Rand) string { return fmt.Sprintf("%02d:%02d", 8+r.IntN(9), 15*r.IntN(4)) }
)

var hardTools = []hardTool{
	{server: "payments", name: "refund_payment", taskType: "support",
		situations: [][2]string{
			{"issuing a partial refund after a customer returned one item of a multi-item order in the %s project",
				"partially refunding a multi-item order where one item came back (%s)"},
			{"refunding a duplicate charge reported by a subscriber in the %s project",
				"giving a subscriber their money back for a double charge, %s"},
			{"processing a goodwill refund for a late delivery in the %s project",
				"compensating a customer whose parcel arrived late with a refund in %s"},
		},
		args: []hardArg{{"charge", chargeID}, {"amount", amount}, {"currency", currency}, {"reason", oneOf("requested_by_customer", "duplicate")}},
		errors: []hardError{
			{"400", "refund amount %s exceeds remaining refundable amount %s", fs(amount, amount), "refund amount <*> exceeds remaining refundable amount <*>",
				"sum the refunds already made on the charge and refund only what remains"},
			{"400", "missing required argument: currency", nil, "missing required argument: currency",
				"pass currency as the three-letter ISO code of the original charge, read from the charge"},
			{"400", "refund amount %s exceeds captured amount %s", fs(amount, amount), "refund amount <*> exceeds captured amount <*>",
				"read amount_captured minus amount_refunded from the charge and refund at most that"},
			{"400", "currency %s does not match the charge currency %s", fs(currency, currency), "currency <*> does not match the charge currency <*>",
				"refund in the charge's own currency; convert the amount before calling, never the currency field"},
			{"409", "charge %s has already been refunded", fs(chargeID), "charge <*> has already been refunded",
				"list the refunds of the charge first and treat an existing full refund as success"},
			{"409", "charge %s is under dispute; refunds are blocked", fs(chargeID), "charge <*> is under dispute; refunds are blocked",
				"answer the dispute with evidence instead of refunding; a won dispute returns the funds"},
			{"400", "refund window closed: charge %s is older than %s days", fs(chargeID, number(90, 180)), "refund window closed: charge <*> is older than <*> days",
				"send the money as a payout or store credit; charges past the window cannot be refunded"},
		}},
	{server: "payments", name: "capture_payment", taskType: "checkout",
		situations: [][2]string{
			{"capturing the authorized payment when an order shipped in the %s project",
				"taking the money for an authorised card payment once the order went out (%s)"},
			{"capturing a held payment for a pre-order that became available in the %s project",
				"charging the hold on a pre-order now that it is in stock, %s"},
		},
		args: []hardArg{{"payment", authID}, {"amount_to_capture", amount}},
		errors: []hardError{
			{"400", "capture amount %s is below the minimum charge amount %s", fs(amount, oneOf("0.50", "0.30", "50")), "capture amount <*> is below the minimum charge amount <*>",
				"add small captures to the next invoice instead of capturing them alone"},
			{"402", "authorization %s has expired", fs(authID), "authorization <*> has expired",
				"create a new payment with the saved payment method; authorizations lapse after seven days"},
			{"400", "capture amount %s exceeds authorized amount %s", fs(amount, amount), "capture amount <*> exceeds authorized amount <*>",
				"capture at most the authorized amount and charge the difference as a separate payment"},
			{"409", "authorization %s was already captured", fs(authID), "authorization <*> was already captured",
				"look the payment up before capturing; a captured authorization means the order is paid"},
			{"400", "missing required argument: amount_to_capture", nil, "missing required argument: amount_to_capture",
				"send amount_to_capture in minor units (cents), even for a full capture"},
			{"402", "card %s declined: insufficient funds", fs(prefixed("card_")), "card <*> declined: insufficient funds",
				"ask the customer for another payment method; do not retry a declined card"},
			{"402", "payment method %s expired", fs(pmID), "payment method <*> expired",
				"ask the customer to update the card in the billing portal, then retry with the new method"},
		}},
	{server: "payments", name: "create_subscription", taskType: "billing",
		situations: [][2]string{
			{"moving a customer from a monthly to an annual plan in the %s project",
				"switching a customer's plan from monthly to yearly (%s)"},
			{"starting a subscription after a free trial ended in the %s project",
				"turning a finished trial into a paid subscription in %s"},
		},
		args: []hardArg{{"customer", cusID}, {"price", priceID}, {"payment_method", pmID}},
		errors: []hardError{
			{"400", "price %s is archived", fs(priceID), "price <*> is archived",
				"look up the active price of the product by its lookup key; archived prices cannot be used"},
			{"400", "customer %s has no default payment method", fs(cusID), "customer <*> has no default payment method",
				"attach the payment method and set it as invoice_settings.default_payment_method first"},
			{"400", "trial period of %s days exceeds the maximum of 730", fs(number(731, 999)), "trial period of <*> days exceeds the maximum of <*>",
				"use trial_end with a date at most two years ahead instead of trial_period_days"},
			{"402", "payment method %s expired", fs(pmID), "payment method <*> expired",
				"create the subscription with payment_behavior default_incomplete and send the customer the update link"},
			{"400", "currency %s does not match the customer's currency %s", fs(currency, currency), "currency <*> does not match the customer's currency <*>",
				"pick the price in the customer's existing currency; a customer cannot mix currencies"},
			{"400", "missing required argument: price", nil, "missing required argument: price",
				"pass items with a price id for each line, not the product id"},
		}},
	{server: "shipping", name: "create_shipment", taskType: "fulfilment",
		situations: [][2]string{
			{"buying a shipping label for an international order in the %s project",
				"getting a label for an order going abroad (%s)"},
			{"creating a shipment for a bulky furniture order in the %s project",
				"shipping a large furniture order, %s"},
			{"re-shipping a replacement for a lost parcel in the %s project",
				"sending a replacement parcel after the first one got lost in %s"},
		},
		args: []hardArg{{"order", orderNo}, {"service", service}, {"weight_kg", small}, {"customs_declaration", oneOf("attached", "cn23")}},
		errors: []hardError{
			{"422", "declared value %s exceeds the carrier limit of %s", fs(amount, oneOf("2500.00", "1000.00")), "declared value <*> exceeds the carrier limit of <*>",
				"buy third-party insurance for the excess and declare at most the carrier limit"},
			{"422", "address validation failed: postal code '%s' does not match city '%s'", fs(postcode, city), "address validation failed: postal code <*> does not match city <*>",
				"run the address through validate_address and use the corrected postal code it suggests"},
			{"422", "parcel weight %s kg exceeds the carrier limit of %s kg", fs(number(31, 90), oneOf("30", "25")), "parcel weight <*> kg exceeds the carrier limit of <*> kg",
				"split the order into several parcels under the limit, or book freight"},
			{"400", "missing required argument: customs_declaration", nil, "missing required argument: customs_declaration",
				"add customs_declaration with HS codes and values for each item on non-domestic shipments"},
			{"403", "carrier account %s is not enabled for service '%s'", fs(acctID, service), "carrier account <*> is not enabled for service <*>",
				"list the account's enabled services and fall back to one of them"},
			{"409", "label for order %s already exists", fs(orderNo), "label for order <*> already exists",
				"fetch the existing label instead of buying another; void it first if it must change"},
			{"422", "parcel dimensions %s cm exceed the maximum girth", fs(dims), "parcel dimensions <*> cm exceed the maximum girth",
				"measure length plus twice width plus twice height and choose a bulky service above the limit"},
		}},
	{server: "shipping", name: "schedule_pickup", taskType: "fulfilment",
		situations: [][2]string{
			{"booking a carrier pickup for the day's parcels at the warehouse in the %s project",
				"arranging for the carrier to collect today's parcels from the warehouse (%s)"},
			{"scheduling a return pickup from a customer's address in the %s project",
				"getting the carrier to collect a return at the customer's home, %s"},
		},
		args: []hardArg{{"location", prefixed("loc_")}, {"date", date}, {"ready_time", clock}, {"close_time", clock}},
		errors: []hardError{
			{"422", "pickup date %s is a carrier holiday", fs(date), "pickup date <*> is a carrier holiday",
				"ask the carrier's calendar for the next working day and book that"},
			{"422", "pickup window %s-%s is shorter than the minimum of 2 hours", fs(clock, clock), "pickup window <*>-<*> is shorter than the minimum of <*> hours",
				"widen ready_time to close_time to at least two hours"},
			{"409", "no shipments ready for pickup at location %s", fs(prefixed("loc_")), "no shipments ready for pickup at location <*>",
				"create the shipments (labels) before booking the pickup that collects them"},
			{"400", "missing required argument: ready_time", nil, "missing required argument: ready_time",
				"send ready_time and close_time in the location's local time with its offset"},
			{"403", "carrier account %s is not enabled for service 'pickup'", fs(acctID), "carrier account <*> is not enabled for service <*>",
				"drop the parcels at a carrier point instead, or enable pickups for the account in the carrier portal"},
		}},
	{server: "inventory", name: "reserve_stock", taskType: "fulfilment",
		situations: [][2]string{
			{"reserving stock for a confirmed order before picking in the %s project",
				"holding inventory for an order that was just confirmed (%s)"},
			{"reserving items for a marketplace order in the %s project",
				"putting stock aside for an order that came in through the marketplace, %s"},
		},
		args: []hardArg{{"order", orderNo}, {"sku", skuID}, {"quantity", small}, {"warehouse_id", whID}},
		errors: []hardError{
			{"422", "quantity %s exceeds the per-order limit of %s", fs(number(11, 99), oneOf("10", "5")), "quantity <*> exceeds the per-order limit of <*>",
				"cap the reservation at the limit and flag the order for manual review as likely resale"},
			{"409", "insufficient stock for %s: requested %s, available %s", fs(skuID, small, small), "insufficient stock for <*>: requested <*>, available <*>",
				"reserve what is available, backorder the rest and tell the customer the split"},
			{"422", "%s is discontinued", fs(skuID), "<*> is discontinued",
				"look up the successor SKU in the catalogue's replaced_by field and reserve that"},
			{"423", "warehouse %s is not accepting reservations", fs(whID), "warehouse <*> is not accepting reservations",
				"reserve from the next warehouse in the routing list; a locked warehouse is counting stock"},
			{"409", "reservation %s already exists for order %s", fs(resID, orderNo), "reservation <*> already exists for order <*>",
				"reuse the existing reservation; reservations are per order, not per call"},
			{"400", "missing required argument: warehouse_id", nil, "missing required argument: warehouse_id",
				"pick the warehouse with route_order before reserving; there is no default warehouse"},
			{"422", "quantity %s is not a multiple of the pack size %s", fs(small, oneOf("6", "12", "24")), "quantity <*> is not a multiple of the pack size <*>",
				"round the quantity up to whole packs and reserve packs, not units"},
		}},
	{server: "inventory", name: "transfer_stock", taskType: "fulfilment",
		situations: [][2]string{
			{"moving stock between warehouses to rebalance before a sale in the %s project",
				"shifting inventory from one warehouse to another ahead of a promotion (%s)"},
			{"transferring returned items back into sellable stock in the %s project",
				"putting returned goods back into the sellable pool, %s"},
		},
		args: []hardArg{{"sku", skuID}, {"from", whID}, {"to", whID}, {"quantity", small}, {"reason_code", oneOf("rebalance", "return_restock")}},
		errors: []hardError{
			{"409", "insufficient stock for %s at %s: requested %s, available %s", fs(skuID, whID, small, small), "insufficient stock for <*> at <*>: requested <*>, available <*>",
				"transfer only the available quantity and check open reservations that hold the rest"},
			{"423", "warehouse %s is not accepting transfers", fs(whID), "warehouse <*> is not accepting transfers",
				"wait for the stock count to finish (the lock lifts) or route through another warehouse"},
			{"400", "source and destination warehouse are both %s", fs(whID), "source and destination warehouse are both <*>",
				"read the destination from the rebalance plan; do not default it to the source"},
			{"400", "missing required argument: reason_code", nil, "missing required argument: reason_code",
				"send reason_code rebalance or return_restock; transfers without one are refused"},
			{"422", "lot %s is quarantined", fs(prefixed("LOT-")), "lot <*> is quarantined",
				"release the lot through quality control before moving it; quarantined lots cannot move"},
		}},
}

// fs lists value generators.
func fs(f ...func(r *rand.Rand) string) []func(r *rand.Rand) string { return f }

// render fills e's error text with fresh values.
func (e hardError) render(r *rand.Rand) string {
	args := make([]any, len(e.vals))
	for i, v := range e.vals {
		args[i] = v(r)
	}
	return fmt.Sprintf(e.format, args...)
}

var hardProjects = []string{"storefront-api", "checkout-web", "subscriptions-core", "warehouse-ops", "returns-portal",
	"marketplace-sync", "b2b-ordering", "gift-cards", "loyalty-service", "fulfilment-router", "customer-care-bot",
	"finance-reconciliation"}

// Hard-negative set sizes: HardGroups groups (one tool in one situation,
// one experience per error of the tool) and HardQueries queries.
const (
	HardGroups  = 60
	HardQueries = 80
	// HardPrefix names the hard-negative set's files in the benchmark
	// directory (hard-experiences.jsonl, hard-queries.jsonl).
	HardPrefix = "hard-"
)

type hardGroup struct {
	tool    *hardTool
	sit     int
	project string
	first   int // index of the group's first experience
}

// GenerateHard returns the hard-negative set's experiences and queries.
func GenerateHard() ([]hindsight.Experience, []Query) {
	r := rand.New(rand.NewPCG(20261102, 9))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	var exps []hindsight.Experience
	var groups []hardGroup
	seen := map[string]bool{}
	for g := range HardGroups {
		t := &hardTools[g%len(hardTools)]
		var sit int
		var proj string
		for {
			sit, proj = r.IntN(len(t.situations)), pick(hardProjects)
			if k := fmt.Sprint(t.name, sit, proj); !seen[k] {
				seen[k] = true
				break
			}
		}
		groups = append(groups, hardGroup{tool: t, sit: sit, project: proj, first: len(exps)})
		situation := fmt.Sprintf(t.situations[sit][0], proj)
		for _, he := range t.errors {
			n := len(exps) + 1
			e := hindsight.Experience{
				ID: fmt.Sprintf("hexp-%04d", n), Version: 1, Namespace: hindsight.DefaultNamespace,
				Server: t.server, Tool: t.name, TaskType: t.taskType, ErrorCode: he.code,
				Situation:     fmt.Sprintf("%s failed: %s", situation, he.render(r)),
				Action:        fmt.Sprintf("called %s", t.name),
				Result:        "succeeded after the fix below",
				Lesson:        fmt.Sprintf("When %s fails with %q: %s.", t.name, he.tmpl, he.lesson),
				ErrorTemplate: he.tmpl,
				Origin:        pick([]string{"rules", "llm"}),
				Confidence:    0.5 + 0.05*float64(r.IntN(10)),
				SourceTask:    fmt.Sprintf("task-%05d", r.IntN(100000)),
				SourceSteps:   []int{r.IntN(5), 5 + r.IntN(5)},
				EvidenceCount: 1 + r.IntN(4),
				HitCount:      r.IntN(6),
				SourceAgent:   pick([]string{"claude-code", "cursor", "codex", "goose"}),
				CreatedAt:     RefTime.Add(-time.Duration(1+r.IntN(60*24)) * time.Hour),
			}
			e.UpdatedAt = e.CreatedAt
			exps = append(exps, e)
		}
	}
	forms := []string{
		"%s. Called %s(%s) and it failed: %s",
		"While %s, %s(%s) returned %q",
		"%s; %s with %s keeps erroring: %s",
	}
	var qs []Query
	for i := range HardQueries {
		gr := groups[i%len(groups)]
		t := gr.tool
		k := r.IntN(len(t.errors))
		he := t.errors[k]
		msg := he.render(r)
		// Half the queries word the situation as the experience does (the
		// agent is in the same situation), half paraphrase it.
		sit := fmt.Sprintf(t.situations[gr.sit][r.IntN(2)], gr.project)
		missing, _ := strings.CutPrefix(he.format, "missing required argument: ")
		var args []string
		for _, a := range t.args {
			if a.name != missing {
				args = append(args, a.name+"="+a.val(r))
			}
		}
		text := fmt.Sprintf(forms[i%len(forms)], sit, t.name, strings.Join(args, ", "), msg)
		text = strings.ToUpper(text[:1]) + text[1:]
		q := Query{ID: fmt.Sprintf("hq-%03d", i), Text: text, Server: t.server, Tool: t.name, ErrorCode: he.code,
			Want: exps[gr.first+k].ID, Lang: "en"}
		if i%3 != 2 {
			q.ErrorTemplate = Mask(msg)
		}
		qs = append(qs, q)
	}
	return exps, qs
}

// Mask makes an error template of an error text as the sidecar does:
// quoted values and every word holding a digit become <*>, and punctuation
// around a word is kept. Unquoted words without digits (a currency code, a
// service name) stay literal.
func Mask(msg string) string {
	var out []string
	inQuote := false
	for _, w := range strings.Fields(msg) {
		if inQuote {
			if i := strings.LastIndexAny(w, `'"`); i >= 0 {
				inQuote = false
				out[len(out)-1] += w[i+1:] // punctuation after the quote
			}
			continue
		}
		if w[0] == '\'' || w[0] == '"' {
			rest := strings.TrimRight(w[1:], ".,;:)")
			if !strings.HasSuffix(rest, w[:1]) {
				inQuote = true
			}
			out = append(out, "<*>"+w[len(strings.TrimRight(w, ".,;:)")):])
			continue
		}
		if strings.IndexFunc(w, unicode.IsDigit) >= 0 {
			core := strings.TrimRight(w, ".,;:)")
			out = append(out, "<*>"+w[len(core):])
			continue
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}
