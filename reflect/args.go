package reflect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// argDiff is how the arguments of a recovery differ from the failure's,
// by argument path: "currency", "payment.method", "items[].sku".
type argDiff struct {
	added, removed []string
	changed        []string
	old, new       map[string]json.RawMessage
}

func diffArgs(failed, ok json.RawMessage) argDiff {
	d := argDiff{old: flatten(failed), new: flatten(ok)}
	for k, v := range d.new {
		ov, had := d.old[k]
		switch {
		case !had:
			d.added = append(d.added, k)
		case !bytes.Equal(canonical(ov), canonical(v)):
			d.changed = append(d.changed, k)
		}
	}
	for k := range d.old {
		if _, ok := d.new[k]; !ok {
			d.removed = append(d.removed, k)
		}
	}
	// An added object is one change, not one per leaf: keep the shortest
	// paths.
	d.added = outermost(d.added)
	d.removed = outermost(d.removed)
	sort.Strings(d.changed)
	return d
}

// flatten maps the argument paths of an arguments object to their values:
// nested objects become "a.b", array elements "a[]" (the last element's
// value when several share a path). Arrays of scalars stay whole.
func flatten(args json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return out
	}
	var walk func(prefix string, v json.RawMessage, depth int)
	walk = func(prefix string, v json.RawMessage, depth int) {
		t := bytes.TrimSpace(v)
		if depth < 4 && len(t) > 0 && t[0] == '{' {
			var o map[string]json.RawMessage
			if json.Unmarshal(t, &o) == nil && len(o) > 0 {
				for k, x := range o {
					walk(prefix+"."+k, x, depth+1)
				}
				return
			}
		}
		if depth < 4 && len(t) > 0 && t[0] == '[' {
			var a []json.RawMessage
			if json.Unmarshal(t, &a) == nil && len(a) > 0 && bytes.HasPrefix(bytes.TrimSpace(a[0]), []byte("{")) {
				for _, x := range a {
					walk(prefix+"[]", x, depth+1)
				}
				return
			}
		}
		out[prefix] = v
	}
	for k, v := range m {
		walk(k, v, 0)
	}
	return out
}

// outermost sorts paths and drops those under another one of the list.
func outermost(paths []string) []string {
	sort.Strings(paths)
	var out []string
	for _, p := range paths {
		if !slices.ContainsFunc(out, func(q string) bool { return strings.HasPrefix(p, q+".") || strings.HasPrefix(p, q+"[]") }) {
			out = append(out, p)
		}
	}
	return out
}

// leafName is the last name of an argument path: "amount" of
// "payment_methods[].amount".
func leafName(path string) string {
	path = strings.TrimSuffix(path, "[]")
	if i := strings.LastIndexAny(path, ".]"); i >= 0 {
		return path[i+1:]
	}
	return path
}

// scalarOf is a JSON scalar's text: a string's content, a number's digits.
func scalarOf(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return ""
	}
	return scalarString(x)
}

func quoteAll(list []string, max int) []string {
	var out []string
	for i, s := range list {
		if i == max {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprintf("%q", s))
	}
	return out
}

// canonical re-encodes JSON with sorted keys so equal values compare equal.
func canonical(b json.RawMessage) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}
