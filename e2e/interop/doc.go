// Package interop holds the stdio sidecar's interoperability tests: real
// MCP servers from npm and a real MCP client, talking directly and through
// the hindsight binary, must see the same conversation; and a scripted
// fake server shows that unknown methods and members pass byte for byte.
package interop
