package corpus

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The values below are drawn fresh per task (gen.fresh): no task's ids,
// names, e-mail addresses, paths or event dates occur in another task.

var firstNames = strings.Fields(`Amara Bastian Chiara Dmitri Elena Farid Greta Hiroshi Ines Jonas Kavya Lars
	Mei Nadia Olu Pablo Quinn Rosa Soren Tamar Umar Vera Wen Ximena Yusuf Zofia Anouk Bruno Carmen Dario
	Esme Felix Gideon Hana Ivo Juno Kenji Leona Mateo Nora`)

var lastNames = strings.Fields(`Abara Brandt Castellano Dvorak Eriksen Fontaine Gallagher Haddad Iwasaki
	Jovanovic Kowalski Lindqvist Moreau Nakamura Okafor Petrov Quintero Rahman Sandoval Takahashi Ueda
	Varga Whitfield Xu Yilmaz Zeller Achebe Bianchi Costa Delacroix Engel Ferreira`)

var mailDomains = []string{"example.com", "example.net", "example.org", "mail.example.com", "post.example.net"}

type person struct{ first, last, email string }

func (p person) name() string { return p.first + " " + p.last }

// person draws a person with a name and an e-mail address no other task
// uses.
func (g *gen) person() person {
	full := g.fresh(func() string { return g.pick(firstNames) + " " + g.pick(lastNames) })
	first, last, _ := strings.Cut(full, " ")
	email := g.fresh(func() string {
		local := strings.ToLower(first) + "." + strings.ToLower(last)
		switch g.r.IntN(3) {
		case 0:
			local = strings.ToLower(first[:1] + last)
		case 1:
			local += fmt.Sprint(g.between(2, 99))
		}
		return local + "@" + g.pick(mailDomains)
	})
	return person{first, last, email}
}

func (g *gen) customerID() string {
	return g.fresh(func() string { return fmt.Sprintf("C-%d", g.between(1000, 99999)) })
}

func (g *gen) orderID() string {
	return g.fresh(func() string { return fmt.Sprintf("ORD-%05d", g.between(10000, 99999)) })
}

func (g *gen) sku() string {
	return g.fresh(func() string { return fmt.Sprintf("SKU-%06d", g.between(100000, 999999)) })
}

// amount draws a price in [lo, hi] with cents.
func (g *gen) amount(lo, hi float64) float64 {
	return math.Round((lo+g.r.Float64()*(hi-lo))*100) / 100
}

// eventDate draws a day for a meeting, in the months after the corpus's
// three weeks, that no other task uses.
func (g *gen) eventDate() time.Time {
	d := g.fresh(func() string {
		return corpusStart.AddDate(0, 0, 28+g.r.IntN(150)).Format(time.DateOnly)
	})
	t, _ := time.Parse(time.DateOnly, d)
	return t
}

// money formats an amount as the shop's texts do.
func money(v float64) string { return fmt.Sprintf("%.2f", v) }
