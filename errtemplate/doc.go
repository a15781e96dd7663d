// Package errtemplate groups tool error texts into templates whose variable
// parts are masked by Wildcard, online, in the manner of the Drain log
// template miner (He et al., ICWS 2017; the drain3 project).
//
// A text is first tokenized (Tokens) and masked (Mask): numbers, ids, quoted
// values, dates, e-mail addresses, URLs, paths and IP addresses become "<*>".
// A Miner then routes the masked tokens through a fixed-depth tree, per key:
// by token count, then by the first Depth-2 tokens (a token holding a digit or
// a wildcard goes to the "<*>" child). Among the clusters at the leaf it picks
// the one with the largest share of positions whose tokens are equal (ties go
// to the template with more wildcards, then to the older cluster) and joins it
// when that share is at least Options.Similarity: the positions that differ
// become "<*>" in its template. Otherwise the text starts a new cluster. A
// cluster keeps the ID derived from its first template for its whole life.
//
// Similarity and Same compare a stored template with a new text without a
// Miner, e.g. to rank lessons learned about one error template.
package errtemplate
