// Package imagetrim drops the pages of the running executable's code and
// read-only data that the process has mapped, so that its resident set
// holds only the pages it touches from then on.
//
// A Go binary's package initialisation and start-up touch code and data
// spread across the whole image, and the kernel maps the neighbours of each
// page faulted in as well; most of those pages are never used again by a
// long-running relay. The pages stay in the page cache (shared with every
// process of the same binary), so a page touched again costs a minor
// fault, not a read.
package imagetrim
