package convert

import (
	"strings"
	"testing"
)

func TestPyCallResult(t *testing.T) {
	for _, c := range []struct {
		in, text string
		isError  bool
	}{
		{`meta=None content=[TextContent(type='text', text='it\'s "fine"\nnext \\ \xe9', annotations=None)] isError=False`, "it's \"fine\"\nnext \\ é", false},
		{`meta=None content=[TextContent(type='text', text="a 'b'", annotations=None), TextContent(type='text', text='c')] isError=True`, "a 'b'\nc", true},
		{`meta=None content=[] isError=True`, "", true},
	} {
		text, isError, err := pyCallResult(c.in)
		if err != nil || text != c.text || isError != c.isError {
			t.Errorf("pyCallResult(%q) = %q, %v, %v; want %q, %v", c.in, text, isError, err, c.text, c.isError)
		}
	}
	for _, bad := range []string{"", "Error: boom", `meta=None content=[TextContent(text='x)] isError=True`, `meta=None content=[] isError=Maybe`} {
		if _, _, err := pyCallResult(bad); err == nil {
			t.Errorf("pyCallResult(%q) read a result", bad)
		}
	}
}

func TestLiveResultUnwrapsTheServersResult(t *testing.T) {
	var c Call
	liveResult(&c, `meta=None content=[TextContent(type='text', text='{\n  "content": [{"type": "text", "text": "Input validation error: \'path\' is a required property"}],\n  "isError": true\n}', annotations=None)] isError=False`)
	if !c.IsError || c.Text != "Input validation error: 'path' is a required property" || !strings.HasPrefix(string(c.Result), `{"content"`) {
		t.Errorf("got %+v", c)
	}
	c = Call{}
	liveResult(&c, `meta=None content=[TextContent(type='text', text='Error executing tool execute-tool: INTERNAL_ERROR', annotations=None)] isError=True`)
	if !c.IsError || c.Text != "INTERNAL_ERROR" || c.Result != nil {
		t.Errorf("got %+v", c)
	}
}

func TestClassify(t *testing.T) {
	for text, want := range map[string]string{
		"Input validation error: 'file_hash' is a required property":   "required_property:file_hash",
		"Error: ENOENT: no such file or directory, open '/root/a.csv'": "file_not_found",
		"Weird 'x' failure 42 at /tmp/y":                               "ref:weird_failure_at",
	} {
		if got := LiveMCPBenchClasses.Classify(Call{Text: text}); got != want {
			t.Errorf("Classify(%q) = %q, want %q", text, got, want)
		}
	}
}

// FuzzPyCallResult holds the repr reader to never panicking and to
// returning valid UTF-8 text when it reads a result.
func FuzzPyCallResult(f *testing.F) {
	f.Add(`meta=None content=[TextContent(type='text', text='a\'b\n\x41\u00e9', annotations=None)] isError=True`)
	f.Add(`meta=None content=[TextContent(type='text', text="\U0001F600")] isError=False`)
	f.Add(`meta=x text='\`)
	f.Fuzz(func(t *testing.T, s string) {
		text, _, err := pyCallResult(s)
		if err == nil && !strings.Contains(s, "text=") && text != "" {
			t.Errorf("text %q from a repr without text=", text)
		}
	})
}
