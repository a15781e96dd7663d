package wire

import "time"

// stamp is an RFC 3339 time the scanner parsed in full, as far as another
// time of the same second and zone can reuse it: the bytes of its date and
// time to the second, those of its zone, and its time less its fraction
// of a second.
type stamp struct {
	second [len("2006-01-02T15:04:05")]byte
	zone   [len("-07:00")]byte
	zlen   int // 0: nothing kept
	base   time.Time
}

// keep remembers t, parsed from s (a string's content, without escapes),
// when s is laid out as RFC 3339 says: digits and separators in their
// places, a fraction of digits or none, and a zone Z or ±hh:mm.
func (c *stamp) keep(s []byte, t time.Time) {
	c.zlen = 0
	if len(s) < len(c.second)+1 || !rfc3339Second(s) {
		return
	}
	rest := s[len(c.second):]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		rest = rest[n:]
	}
	if len(rest) != 1 && len(rest) != len(c.zone) {
		return
	}
	copy(c.second[:], s)
	c.zlen = copy(c.zone[:], rest)
	c.base = t.Add(-time.Duration(t.Nanosecond()))
}

// reuse returns the time s (a string's content) says when it is in the
// kept time's second and zone, with a fraction of one to nine digits or
// none: the kept time's second plus that fraction.
func (c *stamp) reuse(s []byte) (time.Time, bool) {
	if c.zlen == 0 || len(s) < len(c.second)+c.zlen || string(s[:len(c.second)]) != string(c.second[:]) {
		return time.Time{}, false
	}
	rest := s[len(c.second):]
	nsec := 0
	if rest[0] == '.' {
		n := 1
		for ; n < len(rest) && n <= 9 && isDigit(rest[n]); n++ {
			nsec = nsec*10 + int(rest[n]-'0')
		}
		if n == 1 || (n < len(rest) && isDigit(rest[n])) {
			return time.Time{}, false // no digit, or more than nine
		}
		for range 10 - n {
			nsec *= 10
		}
		rest = rest[n:]
	}
	if string(rest) != string(c.zone[:c.zlen]) {
		return time.Time{}, false
	}
	return c.base.Add(time.Duration(nsec)), true
}

// rfc3339Second reports whether s starts with digits and separators laid
// out as 2006-01-02T15:04:05.
func rfc3339Second(s []byte) bool {
	for i, c := range s[:len("2006-01-02T15:04:05")] {
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if !isDigit(c) {
				return false
			}
		}
	}
	return true
}
