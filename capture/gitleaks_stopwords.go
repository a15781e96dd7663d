package capture

import (
	"slices"
	"strconv"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
)

// heldStopWords are the stop words of a gitleaks configuration taken out
// before Translate, which would build an Aho-Corasick automaton of each
// allowlist's (~9.5 MB for the default rules) that the redactor drops
// (lightAllowlists). Each list is replaced by one placeholder word, so
// that an allowlist of stop words alone still validates, and put back
// afterwards lower-cased and deduplicated, as Translate leaves them.
type heldStopWords map[string][]string

// stopWordMark begins a placeholder: a byte no rule file's word holds.
const stopWordMark = "\x00stopwords-"

func holdStopWords(vc *config.ViperConfig) heldStopWords {
	held := heldStopWords{}
	hold := func(words *[]string) {
		if len(*words) == 0 {
			return
		}
		mark := stopWordMark + strconv.Itoa(len(held))
		list := make([]string, len(*words))
		for i, w := range *words {
			list[i] = strings.ToLower(w)
		}
		slices.Sort(list)
		held[mark] = slices.Compact(list)
		*words = []string{mark}
	}
	for i := range vc.Rules {
		r := &vc.Rules[i]
		if r.AllowList != nil {
			hold(&r.AllowList.StopWords)
		}
		for _, a := range r.Allowlists {
			hold(&a.StopWords)
		}
	}
	if vc.AllowList != nil {
		hold(&vc.AllowList.StopWords)
	}
	for _, a := range vc.Allowlists {
		hold(&a.StopWords)
	}
	return held
}

// restore puts the held stop words back into cfg's allowlists, in place
// of their placeholders.
func (h heldStopWords) restore(cfg *config.Config) {
	put := func(as []*config.Allowlist) {
		for _, a := range as {
			if len(a.StopWords) == 1 && strings.HasPrefix(a.StopWords[0], stopWordMark) {
				a.StopWords = h[a.StopWords[0]]
			}
		}
	}
	put(cfg.Allowlists)
	for _, r := range cfg.Rules {
		put(r.Allowlists)
	}
}
