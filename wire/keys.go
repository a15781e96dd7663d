package wire

// key consumes a key of a step's object and returns which it is. It first
// tries next, the key that follows the previous one in the order a
// sidecar writes them: a key with neither escapes nor control characters
// that is followed by its closing quote is that key, as str would read it.
// It reports false for a key that is not a Step's or has escapes.
func (sc *scanner) key(next int) (int, bool) {
	if next < len(stepKeys) {
		if k := stepKeys[next]; len(sc.b)-sc.i >= len(k) && string(sc.b[sc.i:sc.i+len(k)]) == k {
			sc.i += len(k)
			return next, true
		}
	}
	k, plain, ok := sc.str()
	if !ok || !plain {
		return 0, false
	}
	f := stepKey(StringView(k))
	return f, f >= 0
}
