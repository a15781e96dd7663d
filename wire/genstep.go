//go:build ignore

// genstep writes step_gen.go, a Step's JSON codec, from stepFields, the
// one list of a Step's members: go generate ./wire. With -check it writes
// nothing and fails when step_gen.go is not what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"reflect"
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

func main() {
	out := flag.String("o", "step_gen.go", "the file to write")
	check := flag.Bool("check", false, "compare with the file instead of writing it")
	flag.Parse()
	if err := checkFields(); err != nil {
		log.Fatal(err)
	}
	src, err := generate()
	if err != nil {
		log.Fatal(err)
	}
	if *check {
		have, err := os.ReadFile(*out)
		if err != nil {
			log.Fatal(err)
		}
		if !bytes.Equal(have, src) {
			log.Fatalf("%s is stale: run go generate ./wire", *out)
		}
		return
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// A fieldKind says how a Step member's value is written and read.
type fieldKind int

const (
	kindString  fieldKind = iota // a string (or a string type: Type says which)
	kindInt                      // an int
	kindUint                     // a uint64
	kindFloat                    // a float64, written as encoding/json does
	kindTime                     // a time.Time, in RFC 3339 with nanoseconds
	kindBool                     // a bool
	kindRaw                      // a json.RawMessage, copied as it is
	kindJSON                     // a nested value: Append writes it, encoding/json reads it
	kindDerived                  // the compact encoding's "derived" list (no Step field)
)

// stepField is one member of a Step's JSON.
type stepField struct {
	Go   string    // the hindsight.Step field
	Key  string    // its JSON key
	Kind fieldKind // how it is written and read
	Type string    // its Go type, when the kind does not say it
	Omit bool      // omitempty: left out when zero
	// Append is the encoder of a kindJSON member:
	// func(b []byte, key string, v TYPE) []byte, which writes key and v;
	// it is called when v is not nil or empty.
	Append string
	// Meta is where the ingest scanner (scanner.step) puts the value: a
	// field of its Meta (m.Source) or of its failure (fl.isError; of a
	// kindJSON member, whether it is there and not null); "" when it
	// only checks the value's type.
	Meta string
}

// stepFields is the one list of a Step's JSON members, in the order
// AppendStep writes them, which is the order of json.Marshal (the Step's
// fields) followed by the compact encoding's "derived". The codec in
// step_gen.go (the key constants, stepKeys and stepKey, AppendStep's
// members and checks, DecodeStep's and the ingest scanner's per-key
// readers) is generated from it: after changing it or the Step type, run
// `go generate ./wire`. The generator refuses a list that is not the
// Step's fields in their order, and TestStepCodec fails while step_gen.go
// is stale.
var stepFields = [...]stepField{
	{Go: "TaskID", Key: "task_id", Kind: kindString},
	{Go: "SessionID", Key: "session_id", Kind: kindString, Meta: "m.SessionID"},
	{Go: "Server", Key: "server", Kind: kindString, Meta: "m.Server"},
	{Go: "StepIndex", Key: "step_index", Kind: kindInt},
	{Go: "StartedAt", Key: "started_at", Kind: kindTime, Meta: "m.StartedAt"},
	{Go: "EndedAt", Key: "ended_at", Kind: kindTime, Meta: "m.EndedAt"},
	{Go: "LatencyMS", Key: "latency_ms", Kind: kindFloat},
	{Go: "Direction", Key: "direction", Kind: kindString, Type: "hindsight.Direction"},
	{Go: "Method", Key: "method", Kind: kindString},
	{Go: "Tool", Key: "tool", Kind: kindString, Omit: true},
	{Go: "Arguments", Key: "arguments", Kind: kindRaw, Omit: true},
	{Go: "Result", Key: "result", Kind: kindRaw, Omit: true},
	{Go: "IsError", Key: "is_error", Kind: kindBool, Meta: "fl.isError"},
	{Go: "Error", Key: "error", Kind: kindJSON, Type: "*hindsight.RPCError", Omit: true, Append: "appendRPCError", Meta: "fl.rpcError"},
	{Go: "ErrorCode", Key: "error_code", Kind: kindString, Omit: true},
	{Go: "CausalTag", Key: "causal_tag", Kind: kindString, Type: "hindsight.CausalTag", Meta: "fl.tag"},
	{Go: "Redactions", Key: "redactions", Kind: kindInt},
	{Go: "Injected", Key: "injected", Kind: kindJSON, Type: "[]hindsight.Injection", Omit: true, Append: "appendInjected"},
	{Go: "Notifications", Key: "notifications", Kind: kindInt},
	{Go: "Truncated", Key: "truncated", Kind: kindJSON, Type: "[]hindsight.Truncation", Omit: true, Append: "appendTruncated"},
	{Go: "Local", Key: "local", Kind: kindBool, Omit: true},
	{Go: "ClientName", Key: "client_name", Kind: kindString, Omit: true},
	{Go: "ClientVersion", Key: "client_version", Kind: kindString, Omit: true},
	{Go: "ProtocolVersion", Key: "protocol_version", Kind: kindString, Omit: true},
	{Go: "Request", Key: "request", Kind: kindRaw, Omit: true},
	{Go: "Response", Key: "response", Kind: kindRaw, Omit: true},
	{Go: "ExplicitTask", Key: "explicit_task", Kind: kindString, Omit: true, Meta: "m.ExplicitTask"},
	{Go: "HostPID", Key: "host_pid", Kind: kindInt, Omit: true, Meta: "m.HostPID"},
	{Go: "Transport", Key: "transport", Kind: kindString, Omit: true, Meta: "m.Transport"},
	{Go: "Source", Key: "source", Kind: kindString, Meta: "m.Source"},
	{Go: "Seq", Key: "seq", Kind: kindUint, Meta: "m.Seq"},
	{Go: "ErrorTemplate", Key: "error_template", Kind: kindString, Omit: true},
	{Go: "Namespace", Key: "namespace", Kind: kindString, Omit: true},
	{Key: "derived", Kind: kindDerived},
}

// checkFields reports whether stepFields lists the Step's fields, with
// their JSON keys and omitempty, in the order of the type (the order of
// json.Marshal's members), and "derived" last, where AppendCompactStep
// writes it.
func checkFields() error {
	typ := reflect.TypeFor[hindsight.Step]()
	var fields []stepField
	for _, f := range stepFields {
		if f.Kind != kindDerived {
			fields = append(fields, f)
		}
	}
	if len(fields) != typ.NumField() {
		return fmt.Errorf("check step fields: stepFields lists %d of the Step's %d fields", len(fields), typ.NumField())
	}
	for i, f := range fields {
		sf := typ.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Name != f.Go || name != f.Key || (opts == "omitempty") != f.Omit {
			return fmt.Errorf("check step fields: Step field %d is %s %q (%s); stepFields has %s %q (omit %v)", i, sf.Name, name, opts, f.Go, f.Key, f.Omit)
		}
	}
	if stepFields[len(stepFields)-1].Kind != kindDerived {
		return fmt.Errorf(`check step fields: "derived" is not the last member`)
	}
	return nil
}

// generateStepCodec writes step_gen.go from stepFields.
func generate() ([]byte, error) {
	var g bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&g, format+"\n", args...) }
	p("// Code generated by genstep.go (go generate ./wire) from stepFields; DO NOT EDIT.\n")
	p("package wire\n")
	p("import (\n\"errors\"\n\"math\"\n\"strconv\"\n\"time\"\n\n\"github.com/hindsight-proxy/hindsight\"\n)\n")

	p("// The keys of a Step's JSON, as bits of a set, in stepFields' order.")
	p("const (")
	for i, f := range stepFields {
		if i == 0 {
			p("%s = iota", f.constant())
		} else {
			p("%s", f.constant())
		}
	}
	p(")\n")

	p("// stepKeys are the keys of a Step's JSON, quoted, in the order of the")
	p("// constants above, which is the order AppendStep writes them in. The")
	p("// scanner reads keys in any order; in this one it finds each by one")
	p("// comparison (see key).")
	p("var stepKeys = [...]string{")
	for _, f := range stepFields {
		p("`%q`,", f.Key)
	}
	p("}\n")

	p("// stepKey returns the constant of a key, -1 for a key that is not a Step's.")
	p("func stepKey(name string) int {\nswitch name {")
	for _, f := range stepFields {
		p("case %q:\nreturn %s", f.Key, f.constant())
	}
	p("}\nreturn -1\n}\n")

	p("// checkStep reports what json.Marshal refuses to encode in s: a")
	p("// number that is not finite, a year outside of [0,9999].")
	p("func checkStep(s *hindsight.Step) error {")
	for _, f := range stepFields {
		switch f.Kind {
		case kindFloat:
			p("if math.IsNaN(s.%s) || math.IsInf(s.%s, 0) {", f.Go, f.Go)
			p("return errors.New(\"encode step: %s is not a number\")\n}", f.Key)
		case kindTime:
			p("if y := s.%s.Year(); y < 0 || y > 9999 {", f.Go)
			p("return errors.New(\"encode step: %s: year outside of range [0,9999]\")\n}", f.Key)
		}
	}
	p("return nil\n}\n")

	p("// appendStepMembers appends s's members as an object, as json.Marshal")
	p("// would, but with the bodies copied as they are (see AppendStep).")
	p("func appendStepMembers(b []byte, s *hindsight.Step) []byte {")
	lit := "" // literal bytes to append before the next value
	flush := func() {
		if lit != "" {
			p("b = append(b, `%s`...)", lit)
			lit = ""
		}
	}
	for i, f := range stepFields {
		if f.Kind == kindDerived {
			continue
		}
		key := fmt.Sprintf(`,%q:`, f.Key)
		if i == 0 {
			if f.Omit {
				return nil, fmt.Errorf("generate step codec: the first member, %s, is omitempty", f.Key)
			}
			key = "{" + key[1:]
		}
		v := "s." + f.Go
		switch {
		case f.Kind == kindString && f.Omit:
			flush()
			p("b = appendOpt(b, `%s`, %s)", key, f.str(v))
		case f.Kind == kindRaw:
			flush()
			p("b = appendRaw(b, `%s`, %s)", key, v)
		case f.Kind == kindJSON && strings.HasPrefix(f.Type, "*"):
			flush()
			p("if %s != nil {\nb = %s(b, `%s`, %s)\n}", v, f.Append, key, v)
		case f.Kind == kindJSON:
			flush()
			p("if len(%s) > 0 {\nb = %s(b, `%s`, %s)\n}", v, f.Append, key, v)
		case f.Kind == kindBool && f.Omit:
			flush()
			p("if %s {\nb = append(b, `%strue`...)\n}", v, key)
		case f.Omit:
			flush()
			p("if %s != 0 {\nb = append(b, `%s`...)\n%s\n}", v, key, f.appendValue(v))
		case f.Kind == kindTime:
			lit += key + `"`
			flush()
			p("%s", f.appendValue(v))
			lit = `"`
		default:
			lit += key
			flush()
			p("%s", f.appendValue(v))
		}
	}
	lit += "}"
	flush()
	p("return b\n}\n")

	p("// stepTextSize is the length of s's strings and bodies.")
	p("func stepTextSize(s *hindsight.Step) int {")
	var lens []string
	for _, f := range stepFields {
		if f.Kind == kindString || f.Kind == kindRaw {
			lens = append(lens, "len(s."+f.Go+")")
		}
	}
	p("return %s\n}\n", strings.Join(lens, " + "))

	p("// field consumes the value of key f into s.")
	p("func (sc *scanner) field(f int, s *hindsight.Step) (ok bool) {\nswitch f {")
	for _, f := range stepFields {
		p("case %s:", f.constant())
		p("%s", f.read("s."+f.Go, true))
	}
	p("}\nreturn ok\n}\n")

	p("// stepField consumes the value of key f, checking its type, and puts")
	p("// what ingest needs of it into m, or into fl.")
	p("func (sc *scanner) stepField(f int, m *Meta, fl *failure) (ok bool) {\nswitch f {")
	for _, f := range stepFields {
		p("case %s:", f.constant())
		p("%s", f.read(f.Meta, false))
	}
	p("}\nreturn ok\n}")

	src, err := format.Source(g.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format step codec: %w\n%s", err, g.Bytes())
	}
	return src, nil
}

// constant is the name of f's key constant: kTaskID, kDerived.
func (f stepField) constant() string {
	if f.Go == "" {
		return "k" + strings.ToUpper(f.Key[:1]) + f.Key[1:]
	}
	return "k" + f.Go
}

// str converts v, of f's string type, to a string.
func (f stepField) str(v string) string {
	if f.Type == "" {
		return v
	}
	return "string(" + v + ")"
}

// appendValue is the statement that appends v, of f's kind.
func (f stepField) appendValue(v string) string {
	switch f.Kind {
	case kindString:
		return "b = AppendString(b, " + f.str(v) + ")"
	case kindInt:
		return "b = strconv.AppendInt(b, int64(" + v + "), 10)"
	case kindUint:
		return "b = strconv.AppendUint(b, " + v + ", 10)"
	case kindFloat:
		return "b = appendFloat(b, " + v + ")"
	case kindTime:
		return "b = " + v + ".AppendFormat(b, time.RFC3339Nano)"
	case kindBool:
		return "b = strconv.AppendBool(b, " + v + ")"
	}
	panic("no value encoder for " + f.Key)
}

// read is the statement that consumes a value of f's kind into to ("":
// only checking it); decode says the value is decoded (a string
// unescaped), not only scanned.
func (f stepField) read(to string, decode bool) string {
	if f.Kind == kindDerived {
		if decode {
			return "sc.names, ok = sc.derived(true)"
		}
		return "_, ok = sc.derived(false)"
	}
	if f.Kind == kindRaw && to == "" {
		return "ok = sc.skip(1)"
	}
	if f.Kind == kindJSON {
		switch {
		case decode:
			return "_, ok = sc.json(&" + to + ")"
		case to == "":
			return "_, ok = sc.json(new(" + f.Type + "))"
		}
		return to + ", ok = sc.json(new(" + f.Type + "))"
	}
	var call string
	switch f.Kind {
	case kindString:
		switch {
		case decode:
			call = "sc.stringValue()"
		case to == "":
			return "ok = sc.anyString()"
		default:
			call = "sc.plainString()"
		}
	case kindInt:
		call = "sc.int()"
	case kindUint:
		call = "sc.uint()"
	case kindFloat:
		call = "sc.float()"
	case kindTime:
		call = "sc.time()"
	case kindBool:
		call = "sc.bool()"
	case kindRaw:
		call = "sc.raw()"
	}
	switch {
	case to == "":
		return "_, ok = " + call
	case f.Type != "" && f.Kind == kindString:
		return "var v string\nv, ok = " + call + "\n" + to + " = " + f.Type + "(v)"
	}
	return to + ", ok = " + call
}
