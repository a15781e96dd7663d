package corpus

import (
	"fmt"
	"maps"
)

// The shop server: an e-commerce support desk's order, payment and returns
// API. Its workflows: refund an order, return an order's items, change a
// customer's address; each ends with an e-mail to the customer.

const shopTools = `[
{"name":"get_customer","description":"Look up a customer by id or by e-mail address.","inputSchema":{"type":"object","properties":{"customer_id":{"type":"string","pattern":"^C-[0-9]+$"},"email":{"type":"string","format":"email"}}}},
{"name":"find_orders","description":"List a customer's orders, newest first.","inputSchema":{"type":"object","properties":{"customer_id":{"type":"string"},"status":{"type":"string","enum":["open","shipped","delivered","returned","cancelled"]},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["customer_id"]}},
{"name":"get_order","description":"Get one order with its items, payment and captured amount. The order must belong to the customer.","inputSchema":{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ORD-[0-9]{5}$"},"customer_id":{"type":"string"}},"required":["order_id","customer_id"]}},
{"name":"refund_payment","description":"Refund all or part of an order's captured payment.","inputSchema":{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number","exclusiveMinimum":0},"currency":{"type":"string","enum":["USD","EUR","GBP"]},"reason":{"type":"string"}},"required":["order_id","amount","currency"]}},
{"name":"create_return","description":"Open a return (RMA) for items of a delivered order and e-mail a prepaid label.","inputSchema":{"type":"object","properties":{"order_id":{"type":"string"},"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"quantity":{"type":"integer","minimum":1}},"required":["sku","quantity"]}},"reason":{"type":"string","enum":["damaged","wrong_item","not_as_described","no_longer_needed","arrived_late"]}},"required":["order_id","items","reason"]}},
{"name":"update_address","description":"Replace a customer's default shipping address; open orders follow it.","inputSchema":{"type":"object","properties":{"customer_id":{"type":"string"},"address":{"type":"object","properties":{"line1":{"type":"string"},"city":{"type":"string"},"postal_code":{"type":"string"},"country":{"type":"string","enum":["US","GB","DE","FR","NL","ES"]}},"required":["line1","city","postal_code","country"]}},"required":["customer_id","address"]}},
{"name":"send_email","description":"Send a plain-text e-mail to a customer from the support address.","inputSchema":{"type":"object","properties":{"to":{"type":"string","format":"email"},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}},
{"name":"think","description":"Think out loud about the next step. No side effects; returns ok.","inputSchema":{"type":"object","properties":{"thought":{"type":"string"}},"required":["thought"]}}
]`

// shopCase is the customer and orders of a task's shop workflows.
type shopCase struct {
	cust     person
	id       string
	currency string
	orders   []shopOrder
	looked   bool // get_customer done
}

type shopOrder struct {
	id, status, placed string
	items              []shopItem
	total              float64
}

type shopItem struct {
	sku, name string
	qty       int
	price     float64
}

var products = []string{"ceramic pour-over set", "merino hiking socks", "bamboo cutting board", "LED desk lamp",
	"wool throw blanket", "stainless water bottle", "cast iron skillet", "noise-cancelling earbuds", "linen duvet cover",
	"yoga mat", "espresso grinder", "rain jacket", "kids' puzzle set", "leather wallet", "standing desk mat"}

func (t *task) newShopCase() *shopCase {
	g := t.g
	c := &shopCase{cust: g.person(), id: g.customerID(), currency: g.pick([]string{"USD", "EUR", "GBP"})}
	for i := range g.between(2, 4) {
		o := shopOrder{id: g.orderID(), status: "delivered", placed: t.start.AddDate(0, 0, -g.between(3, 60)).Format("2006-01-02")}
		if i == 0 && g.chance(0.5) {
			o.status = "shipped"
		}
		for range g.between(1, 3) {
			it := shopItem{sku: g.sku(), name: g.pick(products), qty: g.between(1, 2), price: g.amount(9, 180)}
			o.items = append(o.items, it)
			o.total += float64(it.qty) * it.price
		}
		o.total = float64(int(o.total*100+0.5)) / 100
		c.orders = append(c.orders, o)
	}
	return c
}

// target is the delivered order the customer writes about.
func (c *shopCase) target() shopOrder {
	for _, o := range c.orders {
		if o.status == "delivered" {
			return o
		}
	}
	return c.orders[0]
}

func (c *shopCase) customerJSON() map[string]any {
	return map[string]any{"customer_id": c.id, "name": c.cust.name(), "email": c.cust.email, "currency": c.currency}
}

func (c *shopCase) ordersJSON() map[string]any {
	var os []map[string]any
	for _, o := range c.orders {
		os = append(os, map[string]any{"order_id": o.id, "placed": o.placed, "status": o.status, "total": money(o.total), "currency": c.currency})
	}
	return map[string]any{"customer_id": c.id, "orders": os}
}

func (c *shopCase) orderJSON(o shopOrder) map[string]any {
	var items []map[string]any
	for _, it := range o.items {
		items = append(items, map[string]any{"sku": it.sku, "name": it.name, "quantity": it.qty, "unit_price": money(it.price)})
	}
	return map[string]any{"order_id": o.id, "customer_id": c.id, "status": o.status, "placed": o.placed, "items": items,
		"total": money(o.total), "captured_amount": money(o.total), "currency": c.currency}
}

// shopFlows returns the task's shop workflows for the episodes in specs
// (nil: one workflow, no episode). They share one customer, and only the
// last sends the e-mail.
func (t *task) shopFlows(specs map[string]bool) []func() {
	c := t.newShopCase()
	var kinds []string
	if specs[ClassMissingCurrency] || specs[ClassExceedsCaptured] {
		kinds = append(kinds, "refund")
	}
	if specs[ClassMissingReason] {
		kinds = append(kinds, "return")
	}
	if specs[ClassCountryCode] {
		kinds = append(kinds, "address")
		if specs[ClassOrderNotFound] && len(kinds) == 1 {
			kinds = append(kinds, "refund") // an address change looks no order up
		}
	}
	if len(kinds) == 0 {
		kinds = append(kinds, t.g.pick([]string{"refund", "return", "address"}))
		if specs[ClassOrderNotFound] && kinds[0] == "address" {
			kinds[0] = "refund"
		}
	}
	t.g.r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var flows []func()
	notFound := specs[ClassOrderNotFound]
	for i, k := range kinds {
		last := i == len(kinds)-1
		nf := notFound && k != "address"
		notFound = notFound && !nf
		flows = append(flows, func() {
			switch k {
			case "refund":
				t.refundFlow(c, specs, nf, last)
			case "return":
				t.returnFlow(c, specs, nf, last)
			default:
				t.addressFlow(c, specs, last)
			}
		})
	}
	return flows
}

func (t *task) lookUpCustomer(c *shopCase) {
	if c.looked {
		return
	}
	c.looked = true
	t.do("shop", "get_customer", map[string]any{"email": c.cust.email}, c.customerJSON())
}

// openOrder gets order o, after an order_not_found episode when notFound:
// the agent first tries an id that is not the customer's, then lists the
// customer's orders and opens o from the list.
func (t *task) openOrder(c *shopCase, o shopOrder, notFound bool) {
	if !notFound {
		if t.g.chance(0.6) {
			t.do("shop", "find_orders", map[string]any{"customer_id": c.id}, c.ordersJSON())
		}
		t.do("shop", "get_order", map[string]any{"order_id": o.id, "customer_id": c.id}, c.orderJSON(o))
		return
	}
	bad := t.g.orderID()
	f := t.fail("shop", "get_order", map[string]any{"order_id": bad, "customer_id": c.id},
		fmt.Sprintf("404 Not Found: no order %s for customer %s", bad, c.id))
	args := map[string]any{"customer_id": c.id}
	if t.g.chance(0.4) {
		args["limit"] = 10
	}
	t.ok("shop", "find_orders", args, c.ordersJSON())
	s := t.ok("shop", "get_order", map[string]any{"order_id": o.id, "customer_id": c.id}, c.orderJSON(o))
	if t.g.chance(0.4) {
		s.thought = fmt.Sprintf("The customer probably mistyped the number; %s on %s is the one with the %s.", o.id, o.placed, o.items[0].name)
	}
	t.episode(ClassOrderNotFound, s, f)
}

var refundReasons = []string{"item arrived damaged", "customer never received the parcel", "price adjustment promised by support",
	"duplicate charge", "goodwill gesture for the late delivery"}

func (t *task) refundFlow(c *shopCase, specs map[string]bool, notFound, last bool) {
	g := t.g
	o := c.target()
	t.lookUpCustomer(c)
	t.openOrder(c, o, notFound)
	reason := g.pick(refundReasons)
	amount := o.total
	if g.chance(0.4) { // a partial refund: one item
		amount = o.items[0].price
	}
	refundID := g.fresh(func() string { return fmt.Sprintf("RF-%07d", g.between(1000000, 9999999)) })
	okResult := map[string]any{"refund_id": refundID, "order_id": o.id, "status": "pending", "currency": c.currency}
	full := map[string]any{"order_id": o.id, "amount": amount, "currency": c.currency, "reason": reason}
	missing, exceeds := specs[ClassMissingCurrency], specs[ClassExceedsCaptured]
	var fails []*call
	if missing {
		args := map[string]any{"order_id": o.id, "amount": amount, "reason": reason}
		if exceeds {
			args["amount"] = o.total + g.amount(4.5, 30)
		}
		fails = append(fails, t.fail("shop", "refund_payment", args, "missing required argument: currency"))
	}
	if exceeds {
		over := o.total + g.amount(4.5, 30)
		if missing {
			over = fails[0].args["amount"].(float64)
		}
		fails = append(fails, t.fail("shop", "refund_payment", map[string]any{"order_id": o.id, "amount": over, "currency": c.currency, "reason": reason},
			fmt.Sprintf("refund amount %s exceeds captured amount %s for order %s", money(over), money(o.total), o.id)))
		t.ok("shop", "get_order", map[string]any{"order_id": o.id, "customer_id": c.id}, c.orderJSON(o))
		full["amount"] = o.total
	}
	okResult["amount"] = money(full["amount"].(float64))
	s := t.ok("shop", "refund_payment", full, okResult)
	switch {
	case missing && exceeds:
		t.episode(ClassMissingCurrency, s, fails[0])
		t.episode(ClassExceedsCaptured, s, fails[1])
	case missing:
		if g.chance(0.5) {
			s.thought = fmt.Sprintf("The order was paid in %s; include the currency this time.", c.currency)
		}
		t.episode(ClassMissingCurrency, s, fails...)
	case exceeds:
		t.episode(ClassExceedsCaptured, s, fails...)
	}
	if last {
		t.email(c, specs, "Your refund for order "+o.id,
			fmt.Sprintf("Hi %s, we have refunded %s %s for order %s (%s). It will show on your statement within 5 business days.", c.cust.first, money(full["amount"].(float64)), c.currency, o.id, reason))
	}
}

var returnReasons = []string{"damaged", "wrong_item", "not_as_described", "no_longer_needed", "arrived_late"}

func (t *task) returnFlow(c *shopCase, specs map[string]bool, notFound, last bool) {
	g := t.g
	o := c.target()
	t.lookUpCustomer(c)
	t.openOrder(c, o, notFound)
	items := []map[string]any{{"sku": o.items[0].sku, "quantity": o.items[0].qty}}
	reason := g.pick(returnReasons)
	rma := g.fresh(func() string { return fmt.Sprintf("RMA-%06d", g.between(100000, 999999)) })
	res := map[string]any{"return_id": rma, "order_id": o.id, "status": "awaiting_shipment", "label_url": "https://returns.example.com/labels/" + rma + ".pdf"}
	args := map[string]any{"order_id": o.id, "items": items, "reason": reason}
	if specs[ClassMissingReason] {
		f := t.fail("shop", "create_return", map[string]any{"order_id": o.id, "items": items}, "missing required argument: reason")
		s := t.ok("shop", "create_return", args, res)
		if g.chance(0.5) {
			s.thought = fmt.Sprintf("Reason has to be one of the enum values; %q fits what the customer said.", reason)
		}
		t.episode(ClassMissingReason, s, f)
	} else {
		t.ok("shop", "create_return", args, res)
	}
	if last {
		t.email(c, specs, "Return label for order "+o.id,
			fmt.Sprintf("Hi %s, your return %s for the %s is open. Print the label at %s and drop the parcel at any carrier point.", c.cust.first, rma, o.items[0].name, res["label_url"]))
	}
}

var streets = []string{"Maple Avenue", "Harbour Road", "Lindenstraße", "Rue des Acacias", "Keizersgracht", "Calle Mayor", "Station Road", "Elm Street"}
var countryNames = map[string]string{"GB": "United Kingdom", "DE": "Germany", "FR": "France", "NL": "Netherlands", "ES": "Spain", "US": "United States"}
var cities = []struct{ city, country string }{{"Leeds", "GB"}, {"Bristol", "GB"}, {"Leipzig", "DE"}, {"Lyon", "FR"}, {"Utrecht", "NL"}, {"Valencia", "ES"}, {"Portland", "US"}, {"Austin", "US"}}

func (t *task) addressFlow(c *shopCase, specs map[string]bool, last bool) {
	g := t.g
	t.lookUpCustomer(c)
	open := map[string]any{"customer_id": c.id, "orders": []map[string]any{}}
	if o := c.orders[0]; o.status == "shipped" {
		open["orders"] = []map[string]any{{"order_id": o.id, "status": "shipped", "placed": o.placed}}
	}
	t.do("shop", "find_orders", map[string]any{"customer_id": c.id, "status": "open"}, open)
	city := cities[g.r.IntN(len(cities))]
	addr := map[string]any{
		"line1":       g.fresh(func() string { return fmt.Sprintf("%d %s", g.between(2, 480), g.pick(streets)) }),
		"city":        city.city,
		"postal_code": g.fresh(func() string { return fmt.Sprintf("%d", g.between(10000, 99999)) }),
		"country":     city.country,
	}
	if specs[ClassCountryCode] {
		// The agent writes the country out; the API's JSON error states
		// the constraint and lists the codes it takes.
		bad := maps.Clone(addr)
		bad["country"] = countryNames[city.country]
		f := t.fail("shop", "update_address", map[string]any{"customer_id": c.id, "address": bad},
			`{"error":{"type":"invalid_request_error","code":"parameter_invalid","param":"address.country","message":"address.country must be a two-letter ISO 3166-1 code, one of: US, GB, DE, FR, NL, ES"}}`)
		s := t.ok("shop", "update_address", map[string]any{"customer_id": c.id, "address": addr}, map[string]any{"customer_id": c.id, "address": addr, "updated": true})
		t.episode(ClassCountryCode, s, f)
	} else {
		t.ok("shop", "update_address", map[string]any{"customer_id": c.id, "address": addr}, map[string]any{"customer_id": c.id, "address": addr, "updated": true})
	}
	if last {
		t.email(c, specs, "Your address has been updated",
			fmt.Sprintf("Hi %s, your default shipping address is now %s, %s. Orders that have not shipped yet will go there.", c.cust.first, addr["line1"], city.city))
	}
}

// email sends the customer an e-mail; with an email_recipient_rejected
// episode the mail server rejects the address on two identical calls and
// the agent gives up.
func (t *task) email(c *shopCase, specs map[string]bool, subject, body string) {
	g := t.g
	args := map[string]any{"to": c.cust.email, "subject": subject, "body": body}
	if !specs[ClassRecipientRejects] {
		msgID := g.fresh(func() string { return "<" + g.hex(16) + "@support.example.com>" })
		t.do("shop", "send_email", args, map[string]any{"message_id": msgID, "queued": true})
		return
	}
	text := fmt.Sprintf("550 5.1.1 <%s>: recipient address rejected: user unknown in virtual mailbox table", c.cust.email)
	fails := []*call{t.fail("shop", "send_email", args, text), t.fail("shop", "send_email", args, text)}
	if g.chance(0.5) {
		fails = append(fails, t.fail("shop", "send_email", args, text))
	}
	t.episode(ClassRecipientRejects, nil, fails...)
}
