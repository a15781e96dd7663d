package errtemplate

import (
	"slices"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"spaces only", " \t\n ", nil},
		{"whitespace runs", "  a\tb \n c  ", []string{"a", "b", "c"}},
		{"punctuation stays attached", "missing required argument: currency, (x)", []string{"missing", "required", "argument:", "currency,", "(x)"}},
		{"quoted run across spaces", `open 'My Documents/a b.txt' now`, []string{"open", "'My Documents/a b.txt'", "now"}},
		{"quoted run with punctuation", `format "March 15", expected`, []string{"format", `"March 15",`, "expected"}},
		{"quoted run in parentheses", `got ('a b') ok`, []string{"got", "('a b')", "ok"}},
		{"key=quoted run", `field name="John Smith" invalid`, []string{"field", `name="John Smith"`, "invalid"}},
		{"apostrophes are not quotes", "don't touch the user's files", []string{"don't", "touch", "the", "user's", "files"}},
		{"unmatched quote", `'abc def`, []string{"'abc", "def"}},
		{"closing quote must end a token", `'it's fine' ok`, []string{"'it's fine'", "ok"}},
		{"curly quotes", "name “Ann Lee” taken", []string{"name", "“Ann Lee”", "taken"}},
		{"unicode", "usuário não encontrado", []string{"usuário", "não", "encontrado"}},
		{"no-break space separates", "a\u00a0b", []string{"a", "b"}},
		{"invalid utf-8", "a\xffb c", []string{"a\uFFFDb", "c"}},
		{"wildcard", "user <*> not found", []string{"user", "<*>", "not", "found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tokens(tt.in)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Tokens(strings.Join(got, " ")); !slices.Equal(again, got) {
				t.Errorf("tokens of the joined tokens = %q, want %q", again, got)
			}
		})
	}
}

func TestTokensLimit(t *testing.T) {
	if got := tokens("a 'b c' d e", 2); !slices.Equal(got, []string{"a", "'b c'"}) {
		t.Errorf("tokens limit 2 = %q", got)
	}
}

func TestMask(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"spaces normalised", "  user \t 42\nnot  found ", "user <*> not found"},
		{"int", "retry after 300 ms", "retry after <*> ms"},
		{"negative and decimal", "temperature -3.5 below 0.25", "temperature <*> below <*>"},
		{"amounts", "paid $12.50 of €1,203 (1,203.00)", "paid <*> of <*> (<*>)"},
		{"number with trailing comma", "total price is 1203, but paid 833", "total price is <*>, but paid <*>"},
		{"id letters digits", "reservation KA7I60 not found", "reservation <*> not found"},
		{"snake id with digits", "gift card gift_card_6276644 is empty", "gift card <*> is empty"},
		{"prefixed id", "order ord_12ab refunded", "order <*> refunded"},
		{"uuid", "contact 8f14e45f-ceea-467f-a0e6-0123456789ab gone", "contact <*> gone"},
		{"hex with digits", "commit 3fa9c1 and 0xdeadbeef", "commit <*> and <*>"},
		{"long all-letter hex", "token deadbeefcafe bad", "token <*> bad"},
		{"short all-letter hex is a word", "a decade ago, accede, facade", "a decade ago, accede, facade"},
		{"single quoted", "invalid date format '03/15/2025', expected YYYY-MM-DD", "invalid date format <*>, expected YYYY-MM-DD"},
		{"double quoted with spaces", `format "March 15", expected`, "format <*>, expected"},
		{"backquoted", "unknown column `created at` in table", "unknown column <*> in table"},
		{"empty quotes", "value '' is empty", "value <*> is empty"},
		{"curly quoted", "name “Ann Lee” taken", "name <*> taken"},
		{"quoted plain word is a value", "missing argument 'currency'", "missing argument <*>"},
		{"unmatched quote kept", `bad 'x42 here`, `bad '<*> here`},
		{"iso date", "departed on 2024-05-01", "departed on <*>"},
		{"us date", "on 05/01/2024.", "on <*>."},
		{"time", "from 14:30 to 15:00:59", "from <*> to <*>"},
		{"rfc3339", "at 2024-05-01T09:30:00Z and 2024-05-01T09:30:00.5+02:00", "at <*> and <*>"},
		{"email", "attendee bob.smith@example.com declined", "attendee <*> declined"},
		{"url", "GET https://api.example.com/v1/users: refused", "GET <*>: refused"},
		{"url without digits", "see http://example.com/docs.", "see <*>."},
		{"www", "visit www.example.com", "visit <*>"},
		{"unix path", "open /etc/shadow failed", "open <*> failed"},
		{"home and relative paths", "copy ~/a ./b ../c", "copy <*> <*> <*>"},
		{"relative file path", "lint src/main.go", "lint <*>"},
		{"windows path", `denied: C:\Users\bob\secret.txt`, "denied: <*>"},
		{"ipv4 and port", "dial tcp 10.0.0.12:5432: i/o timeout", "dial tcp <*>: i/o timeout"},
		{"ipv6", "connect [::1]:80 and fe80::1ff:fe23:4567:890a", "connect [<*> and <*>"},
		{"key=value masks the value", "amount=12.50 currency=usd id=ab12", "amount=<*> currency=usd id=<*>"},
		{"key=quoted value", `name="John Smith" invalid`, "name=<*> invalid"},
		{"status code after HTTP kept", "HTTP 401 Unauthorized", "HTTP 401 Unauthorized"},
		{"status code after status kept", "failed with status 404, (status: 429) status=503", "failed with status 404, (status: 429) status=503"},
		{"other numbers after status masked", "status 42 and code 9999 and HTTP/1.1 404", "status <*> and code <*> and <*> <*>"},
		{"plain words kept", "missing required argument: reservation_id", "missing required argument: reservation_id"},
		{"apostrophes kept", "you don't own the user's calendar", "you don't own the user's calendar"},
		{"names kept", "user Alice Smith not found", "user Alice Smith not found"},
		{"and/or and mime types kept", "and/or application/json N/A", "and/or application/json N/A"},
		{"mentions kept", "@alice not allowed", "@alice not allowed"},
		{"unicode words kept, digits masked", "usuário 42 não encontrado; ユーザー ٤٢", "usuário <*> não encontrado; ユーザー <*>"},
		{"punctuation only", "- ... ( ) ,", "- ... ( ) ,"},
		{"wildcards stay", "user <*> not <*>,", "user <*> not <*>,"},
		{"invalid utf-8", "bad \xff\xfe byte 7", "bad \uFFFD byte <*>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Mask(tt.in)
			if got != tt.want {
				t.Fatalf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Mask(got); again != got {
				t.Errorf("Mask not idempotent: Mask(%q) = %q", got, again)
			}
		})
	}
}

// TestMaskJSONBodies holds templating to reading inside the JSON error
// bodies of real servers: the message, code, type and failing field stay,
// the values go.
func TestMaskJSONBodies(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"Google API", `{"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}`,
			`error.code: <*> error.message: Requested entity was not found. error.status: <*>`},
		{"ToolBench RapidAPI", `{"error": "No such function name: login", "response": ""}`,
			`error: No such function name: login response: <*>`},
		{"zod issues after a prefix", `Error: [ { "code": "invalid_type", "expected": "number", "received": "undefined", "path": [ "timeout_ms" ], "message": "Required" } ]`,
			`Error: [].code: <*> [].expected: <*> [].received: <*> [].path[]: <*> [].message: <*>`},
		{"not JSON to the end", `bad {"a": 1} trailing`, `bad {<*>: <*>} trailing`},
		{"a body in a string is not read twice", `{"detail": "bad value [2] at {x}"}`, `detail: bad value (<*>) at (x)`},
	} {
		if got := Mask(c.text); got != c.want {
			t.Errorf("%s: Mask(%q) = %q, want %q", c.name, c.text, got, c.want)
		}
		if got := Mask(Mask(c.text)); got != Mask(c.text) {
			t.Errorf("%s: Mask not idempotent: %q", c.name, got)
		}
	}
	if Similarity(Mask(`{"error": "No such function name: login", "response": ""}`), `{"error": "No such function name: login", "response": ""}`) != 1 {
		t.Error("a JSON body does not fit its own template")
	}
}
