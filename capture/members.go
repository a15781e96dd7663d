package capture

import "github.com/hindsight-proxy/hindsight/wire"

// eachMember calls fn with the key and the value (a slice of obj, capacity
// capped) of each member of the JSON object obj, in order, until fn
// returns false. It returns false, having called fn for the members
// before, when obj is not an object, a key holds escapes, what it read of
// obj is not valid JSON, or more than space follows the object's end: the
// caller then reads obj by other means.
func eachMember(obj []byte, fn func(k, v []byte) bool) bool {
	end, stopped, ok := members(obj, wire.SkipSpace(obj, 0), skipValue, fn)
	return ok && (stopped || wire.SkipSpace(obj, end) == len(obj))
}

// skipValue is members' usual skip: wire.SkipValue.
func skipValue(b []byte, _ []byte, v int) (int, bool) { return wire.SkipValue(b, v, 1) }

// members walks the members of the object at b[i], in order: skip
// returns the index after the value of a member (key k) that starts at
// b[v], and use is given the member until it returns false. members
// returns the index after the object, whether use stopped the walk, and
// false as eachMember does.
func members(b []byte, i int, skip func(b, k []byte, v int) (int, bool), use func(k, v []byte) bool) (end int, stopped, ok bool) {
	if i >= len(b) || b[i] != '{' {
		return i, false, false
	}
	if i = wire.SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, false, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false, false
		}
		end, escaped, ok := wire.SkipString(b, i)
		if !ok || escaped {
			return i, false, false
		}
		k := b[i+1 : end-1]
		if i = wire.SkipSpace(b, end); i >= len(b) || b[i] != ':' {
			return i, false, false
		}
		v0 := wire.SkipSpace(b, i+1)
		v1, ok := skip(b, k, v0)
		if !ok {
			return v1, false, false
		}
		// The value must end where a member does before use sees it.
		i = wire.SkipSpace(b, v1)
		if i >= len(b) || b[i] != ',' && b[i] != '}' {
			return i, false, false
		}
		if !use(k, b[v0:v1:v1]) {
			return i, true, true
		}
		if b[i] == '}' {
			return i + 1, false, true
		}
		i = wire.SkipSpace(b, i+1)
	}
}
