package guard

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Reasons Check gives.
const (
	// ReasonManipulation: the text addresses the model (its identity,
	// prompt or role) or tells it to set earlier instructions aside.
	ReasonManipulation = "prompt_manipulation"
	// ReasonCredential: the text moves credentials, keys, tokens, private
	// files or the environment somewhere (a tool argument, a URL, a
	// command), or is built on a secret value.
	ReasonCredential = "credential"
	// ReasonCommand: the text carries a shell command or pipeline.
	ReasonCommand = "command"
)

// A Finding says why a text reads as an instruction aimed at an agent.
type Finding struct {
	Reason string
	// Match is what matched, in the folded form rules see, cut to 60
	// bytes.
	Match string
}

// Check returns why any of texts reads as an instruction aimed at the
// assistant rather than advice about a tool, or nil. Each text is matched
// in its folded form (Fold), so invisible characters, look-alike letters
// and compatibility forms change nothing. The rules are written in
// English, Chinese, Spanish, French, German and Russian.
func Check(texts ...string) *Finding {
	for _, t := range texts {
		if t == "" {
			continue
		}
		f := Fold(t)
		var sk sketch
		sk.add(f)
		rs := rules()
		for i := range rs {
			if m := rs[i].match(f, &sk); m != "" {
				return &Finding{Reason: rs[i].reason, Match: cut(m, 60)}
			}
		}
		if !mayCommand(f) {
			continue
		}
		if m := commandPattern().FindString(f); m != "" {
			return &Finding{Reason: ReasonCommand, Match: cut(strings.TrimSpace(m), 60)}
		}
	}
	return nil
}

// CheckLesson is Check of the lesson and the other texts of one
// experience; a lesson that holds a redacted secret (capture's
// "[REDACTED:…]") is advice built on a credential and fails too.
func CheckLesson(lesson string, texts ...string) *Finding {
	if strings.Contains(lesson, "[REDACTED:") {
		return &Finding{Reason: ReasonCredential, Match: "a redacted secret"}
	}
	return Check(append([]string{lesson}, texts...)...)
}

// Detail is f as one line for a log, a reason column or an error.
func (f *Finding) Detail() string { return f.Reason + ": " + f.Match }

// Terms of the rules, per language; each goes through Fold, and one in a
// spaced script matches as the start of a word ("instruction" matches
// "instructions").
var (
	// addressing speaks to the model about itself or its prompt.
	addressing = []string{
		"the assistant must", "the assistant should", "assistant must", "the ai must", "the model must", "as an ai",
		"you are now", "you must now", "from now on", "system prompt", "developer mode", "jailbreak", "new instructions",
		"<system", "</system", "<assistant", "</assistant", "<user>", "</user>", "exfiltrat", "<|im_start|>", "assistant:", "system:", "[system]", "[inst]",
		"你现在是", "从现在开始", "系统提示", "助手必须", "新的指令", "开发者模式",
		"ahora eres", "el asistente debe", "a partir de ahora", "instrucciones del sistema", "nuevas instrucciones",
		"tu es maintenant", "vous etes maintenant", "l'assistant doit", "a partir de maintenant", "nouvelles instructions", "invite systeme",
		"du bist jetzt", "der assistent muss", "ab jetzt", "von nun an", "systemprompt", "neue anweisungen",
		"ты теперь", "ассистент должен", "с этого момента", "системный промпт", "новые инструкции",
	}
	// setAside and earlier: an order to drop what the model was told.
	setAside = []string{
		"ignor", "disregard", "forget", "override", "bypass",
		"忽略", "无视", "忘记", "忽视", "不要理会",
		"olvida", "omite", "descarta", "haz caso omiso",
		"oublie", "neglige", "ne tiens pas compte", "ne tenez pas compte",
		"vergiss", "missacht", "uberseh",
		"игнорир", "забудь", "забыть", "пренебреги", "не обращай внимания",
	}
	earlier = []string{
		"instruction", "prompt", "previous", "prior", "above", "earlier", "guideline", "system message",
		"指令", "指示", "说明", "提示", "规则", "之前", "以前", "上面", "上述",
		"instrucci", "indicaci", "anterior", "previa", "reglas",
		"consigne", "precedent", "regles", "ci-dessus",
		"anweisung", "vorherig", "bisherig", "vorig", "obige", "regeln",
		"инструкц", "указани", "предыдущ", "прежн", "выше", "правил",
	}
	// moving verbs put something somewhere.
	moving = []string{
		"send", "paste", "include", "insert", "attach", "append", "upload", "post", "email", "e-mail", "forward",
		"leak", "reveal", "dump", "print", "exfiltrat", "transmit", "share", "copy", "put", "add", "embed", "supply", "provide",
		"发送", "上传", "粘贴", "包含", "附上", "填入", "放入", "加入", "泄露", "提供", "复制", "输出",
		"envia", "manda", "pega", "incluye", "incluir", "anade", "adjunta", "sube", "copia", "pon", "revela", "proporciona",
		"envoie", "envoyer", "colle", "inclu", "ajoute", "joins", "copie", "revele", "mets", "transmet", "fournis",
		"schick", "sende", "fug", "einfug", "kopier", "lade", "gib", "verrat", "ubermittel", "ubergib",
		"отправ", "вставь", "вставить", "добав", "перешли", "скопир", "загрузи", "укажи", "передай", "раскрой", "выведи", "приложи",
	}
	// secrets are what may never be moved. A bare "token" counts only
	// when it is someone's (secretOwner): page tokens are ordinary.
	secrets = []string{
		"password", "passwd", "passphrase", "credential", "api key", "api-key", "apikey", "access key", "secret key",
		"secret access", "private key", "ssh key", "id_rsa", "id_ed25519", ".ssh", ".env", ".aws", ".netrc", "environment variable",
		"env var", "access token", "auth token", "bearer token", "github token", "personal access token", "refresh token",
		"session cookie", "cookies", "secrets",
		"密钥", "令牌", "密码", "凭据", "凭证", "私钥", "环境变量", "访问密钥",
		"contrasena", "clave", "credencial", "llave privada", "variables de entorno", "token de acceso",
		"mot de passe", "cle api", "cle privee", "identifiants", "jeton", "variables d'environnement",
		"passwort", "kennwort", "schlussel", "zugangsdaten", "umgebungsvariable", "geheimnis",
		"парол", "ключ", "токен", "учетные данные", "учётные данные", "секрет", "переменные окружения",
	}
	secretOwner = []string{"user's", "users'", "user’s", "your", "del usuario", "de l'utilisateur",
		"des benutzers", "des nutzers", "пользовател", "用户的", "你的"}
	// away are where a secret would leave by: an address or a command.
	away       = []string{"http://", "https://", "url", "query string", "curl", "wget", "webhook", "网址", "链接", "ссылк", "адрес"}
	secretWord = []string{"token", "key", "keys"}
	// leaking verbs send a bare "token" or "key" away: these are not
	// what ordinary advice does with a page token.
	leaking = []string{"reveal", "print", "dump", "leak", "send", "upload", "post", "email", "e-mail", "exfiltrat"}
)

// commandPattern matches shell commands and pipelines; compiled on the
// first call.
var commandPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[\s` + "`" + `(;|&])(?:curl|wget|nc|netcat|bash|zsh|powershell|pwsh|cmd\.exe|sudo|chmod|chown|rm\s+-[rf]+|scp|ssh|python3?\s+-c|eval|base64\s+-d)\s+[^\s]|\|\s*(?:sh|bash)(?:$|[^\pL])|\$\(|;\s*(?:rm|curl|wget)(?:$|[^\pL])`)
})

// commandWords are what commandPattern's first alternative needs in a
// folded text (where every white space is one space): a word at the
// start or after a space, "`", "(" or "&", followed by a space. The
// other alternatives need "|", ";" or "$(".
var commandWords = []string{"curl ", "wget ", "nc ", "netcat ", "bash ", "zsh ", "powershell ", "pwsh ",
	"cmd.exe ", "sudo ", "chmod ", "chown ", "rm -", "scp ", "ssh ", "python", "eval ", "base64 "}

// mayCommand reports whether commandPattern can match the folded f: it
// is false only when f lacks every text the pattern needs, so that most
// advice skips the regular expression.
func mayCommand(f string) bool {
	if strings.ContainsAny(f, "|;") || strings.Contains(f, "$(") {
		return true
	}
	for _, w := range commandWords {
		for off := 0; ; {
			j := strings.Index(f[off:], w)
			if j < 0 {
				break
			}
			at := off + j
			if at == 0 || strings.IndexByte(" `(&", f[at-1]) >= 0 {
				return true
			}
			off = at + 1
		}
	}
	return false
}

// A sketch records which pairs of adjacent bytes a text holds (hashed
// into 4,096 bits): a term whose first or last two bytes are not in it
// cannot occur in the text, nor in any part of it.
type sketch [64]uint64

func pairHash(a, b byte) uint32 { return (uint32(a)<<8 | uint32(b)) * 2654435761 >> 20 }

func (s *sketch) add(f string) {
	for i := 0; i+1 < len(f); i++ {
		h := pairHash(f[i], f[i+1])
		s[h>>6] |= 1 << (h & 63)
	}
}

// mayHold reports whether the text s sketched can hold w.
func (s *sketch) mayHold(w string) bool {
	if len(w) < 2 {
		return true
	}
	h, t := pairHash(w[0], w[1]), pairHash(w[len(w)-2], w[len(w)-1])
	return s[h>>6]&(1<<(h&63)) != 0 && s[t>>6]&(1<<(t&63)) != 0
}

// A rule finds its first terms, then, when it has a second set, one of
// those after them within the same clause and at most gap characters on.
type rule struct {
	reason      string
	first, then *terms
	gap         int
}

const (
	ownerThenWord = 20
	clause        = 60
)

// rules returns the rules, their terms folded on the first call: a
// process that never checks a text does not fold them.
var rules = sync.OnceValue(func() []rule {
	var (
		tAddressing = newTerms(addressing)
		tSetAside   = newTerms(setAside)
		tEarlier    = newTerms(earlier)
		tMoving     = newTerms(moving)
		tSecrets    = newTerms(secrets)
		tOwner      = newTerms(secretOwner)
		tOwned      = newTerms(append(append([]string{}, secretWord...), secrets...))
		tAway       = newTerms(away)
		tLeaking    = newTerms(leaking)
		tSecretWord = newTerms(secretWord)
	)
	return []rule{
		{reason: ReasonManipulation, first: tAddressing},
		{reason: ReasonManipulation, first: tSetAside, then: tEarlier, gap: clause},
		{reason: ReasonCredential, first: tMoving, then: tSecrets, gap: clause},
		{reason: ReasonCredential, first: tOwner, then: tOwned, gap: ownerThenWord},
		{reason: ReasonCredential, first: tLeaking, then: tSecretWord, gap: clause},
		{reason: ReasonCredential, first: tSecrets, then: tAway, gap: clause},
	}
})

// match returns the first text r finds in f (folded; sk its sketch, or
// nil), or "".
func (r *rule) match(f string, sk *sketch) string {
	for _, a := range r.first.find(f, sk) {
		if r.then == nil {
			return f[a[0]:a[1]]
		}
		for _, b := range r.then.find(f[a[1]:], sk) {
			between := f[a[1] : a[1]+b[0]]
			if utf8.RuneCountInString(between) > r.gap || endsClause(between) {
				break
			}
			return f[a[0] : a[1]+b[1]]
		}
	}
	return ""
}

// endsClause reports whether s holds the end of a clause: a sentence
// mark, or a full stop before a space (not the dot of a file or host
// name).
func endsClause(s string) bool {
	if strings.ContainsAny(s, ";!?。！？\n") {
		return true
	}
	for i := strings.IndexByte(s, '.'); i >= 0; i = strings.IndexByte(s, '.') {
		if i+1 < len(s) && s[i+1] == ' ' {
			return true
		}
		s = s[i+1:]
	}
	return false
}

// terms are folded words and phrases. One in a spaced script matches at a
// word's start and may go on (a stem: "instruction" matches
// "instructions"); one of Chinese characters, or starting with a
// punctuation mark, matches anywhere.
type terms struct {
	list     []string
	anywhere []bool
}

func newTerms(words []string) *terms {
	t := &terms{}
	for _, w := range words {
		r, _ := utf8.DecodeRuneInString(w)
		t.list = append(t.list, Fold(w))
		t.anywhere = append(t.anywhere, unicode.Is(unicode.Han, r) || !(unicode.IsLetter(r) || unicode.IsDigit(r)))
	}
	return t
}

// find returns the spans [start, end) of the terms in f, in order of
// start; a stem's span runs to its word's end. sk, when not nil, is the
// sketch of f or of a text f is part of: terms it cannot hold are not
// looked for.
func (t *terms) find(f string, sk *sketch) [][2]int {
	var out [][2]int
	for i, w := range t.list {
		if sk != nil && !sk.mayHold(w) {
			continue
		}
		for off := 0; off < len(f); {
			j := strings.Index(f[off:], w)
			if j < 0 {
				break
			}
			start := off + j
			end := start + len(w)
			off = start + 1
			if !t.anywhere[i] {
				if start > 0 {
					if r, _ := utf8.DecodeLastRuneInString(f[:start]); isWord(r) {
						continue
					}
				}
				for end < len(f) {
					r, n := utf8.DecodeRuneInString(f[end:])
					if !isWord(r) || r == '_' {
						break
					}
					end += n
				}
			}
			out = append(out, [2]int{start, end})
		}
	}
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	return out
}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// cut shortens s to at most n bytes at a character's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
