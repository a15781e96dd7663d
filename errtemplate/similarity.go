package errtemplate

// Similarity returns how well text fits template, from 0 to 1. The template is
// split by Tokens (it is not masked again); the text is masked and, like a
// Miner with default Options, cut to its first DefaultMaxTokens tokens.
//
//   - 0 when the token counts differ, or when the template holds an HTTP status
//     code (a literal of three digits, 100-599; Mask keeps only those) and the
//     text has another token there: a 401 never fits a 404 template.
//
//   - Else the share of the template's literal (non-Wildcard) tokens equal to
//     the text's masked token at the same position; a template token such as
//     "<*>," is a literal and must be equal.
//
//   - A template of only wildcards, which says nothing, gives 0.5, or 1 when the
//     text's masked tokens are wildcards too (the text "500" fits "<*>" fully).
//
//   - A quoted literal of the template (Mask never leaves one: a name a
//     caller put back, such as the property in "'file_path' is a required
//     property") must be the text's token at its place, quotes and all, or
//     the text does not fit (0).
//
// "user <*> not found" vs "user 42 not found" gives 1; vs "user 42 is blocked" 0.5.
func Similarity(template, text string) float64 {
	tpl, txt := Tokens(template), maskTokens(text, DefaultMaxTokens)
	var raw []string
	for i, t := range tpl {
		if _, core, _ := splitPunct(t); !isQuoted(core) || len(tpl) != len(txt) {
			continue
		}
		if raw == nil {
			raw = tokens(text, DefaultMaxTokens)
		}
		if raw[i] != t {
			return 0
		}
		txt[i] = t
	}
	return similarity(tpl, txt)
}

// Same reports whether text is an instance of template: Similarity is 1.
func Same(template, text string) bool {
	return Similarity(template, text) == 1
}

func similarity(tpl, txt []string) float64 {
	if len(tpl) != len(txt) {
		return 0
	}
	literals, equal := 0, 0
	for i, t := range tpl {
		if t == Wildcard {
			continue
		}
		if t != txt[i] && isStatusCode(t) {
			return 0
		}
		literals++
		if t == txt[i] {
			equal++
		}
	}
	if literals == 0 {
		for _, x := range txt {
			if x != Wildcard {
				return 0.5
			}
		}
		return 1
	}
	return float64(equal) / float64(literals)
}

// score compares a cluster's template with a text of the same length, as
// Drain does: equal counts the positions whose tokens are equal (a Wildcard in
// both counts), params the template's wildcards where the text has a literal,
// which break ties only. ok is false when a status code differs.
func score(tpl, txt []string) (equal, params int, ok bool) {
	for i, t := range tpl {
		switch {
		case t == txt[i]:
			equal++
		case t == Wildcard:
			params++
		case isStatusCode(t):
			return 0, 0, false
		}
	}
	return equal, params, true
}
