package corpus

// Recovery kinds: how the agent got past a failed call (Label.Recovery).
const (
	// RecoveryFormat: the same tool called again with an argument's value
	// rewritten in another format (a date as YYYY-MM-DD, a timestamp with
	// its UTC offset).
	RecoveryFormat = "format"
	// RecoveryAddedArg: the same call again with an argument added (the
	// currency, the return reason, pause_ms after a 429).
	RecoveryAddedArg = "added_arg"
	// RecoveryPriorCall: another tool called first (create_branch,
	// auth_refresh), then the same call again.
	RecoveryPriorCall = "prior_call"
	// RecoveryOtherID: a lookup (find_orders, list_directory, get_order)
	// whose result holds the right value (an order id, a path, the captured
	// amount), then the tool again with that value.
	RecoveryOtherID = "other_id"
	// RecoveryRetry: the identical call again, after a transient error.
	RecoveryRetry = "retry"
	// RecoveryNone: the agent gave up; Label.RecoveredAt is -1.
	RecoveryNone = "none"
)

// Error classes (Label.ErrorClass): one error template each, recurring
// across tasks with different variable parts.
const (
	ClassDateFormat       = "create_event_date_format" // calendar: invalid start '04/14/2026': expected YYYY-MM-DD
	ClassTimeFormat       = "list_events_time_format"  // calendar: JSON-RPC -32602, time_min not RFC 3339
	ClassMissingCurrency  = "refund_missing_currency"  // shop: missing required argument: currency
	ClassMissingReason    = "return_missing_reason"    // shop: missing required argument: reason
	ClassRateLimited      = "search_rate_limited"      // repo: 429, retry after N ms or pass pause_ms
	ClassBranchMissing    = "pr_branch_missing"        // repo: 422, head branch does not exist
	ClassTokenExpired     = "token_expired"            // repo: 401, token expired; call auth_refresh
	ClassOrderNotFound    = "order_not_found"          // shop: 404, no order X for customer Y
	ClassFileNotFound     = "file_not_found"           // files: ENOENT
	ClassExceedsCaptured  = "refund_exceeds_captured"  // shop: refund amount X exceeds captured amount Y
	ClassUpstreamTimeout  = "upstream_timeout"         // shop, calendar or repo: upstream timed out after Ns
	ClassUnavailable      = "service_unavailable"      // calendar: 503, backend restarting
	ClassRepoArchived     = "repo_archived"            // repo: permission denied, repository archived
	ClassRecipientRejects = "email_recipient_rejected" // shop: 550 recipient address rejected
	ClassCalendarNotFound = "calendar_not_found"       // calendar: JSON body, 404 Calendar not found: <guessed id>
	ClassCountryCode      = "address_country_code"     // shop: JSON body, address.country must be a two-letter code, one of …
)

// class describes an error class.
type class struct {
	name     string
	recovery string
	servers  []string // the servers it occurs on (one is drawn per episode)
	// generic classes attach to the first suitable ordinary call of a
	// server instead of a fixed place in a workflow.
	generic bool
}

// classes lists every error class, in a fixed order.
var classes = []class{
	{name: ClassDateFormat, recovery: RecoveryFormat, servers: []string{"calendar"}},
	{name: ClassTimeFormat, recovery: RecoveryFormat, servers: []string{"calendar"}},
	{name: ClassMissingCurrency, recovery: RecoveryAddedArg, servers: []string{"shop"}},
	{name: ClassMissingReason, recovery: RecoveryAddedArg, servers: []string{"shop"}},
	{name: ClassRateLimited, recovery: RecoveryAddedArg, servers: []string{"repo"}},
	{name: ClassBranchMissing, recovery: RecoveryPriorCall, servers: []string{"repo"}},
	{name: ClassTokenExpired, recovery: RecoveryPriorCall, servers: []string{"repo"}, generic: true},
	{name: ClassOrderNotFound, recovery: RecoveryOtherID, servers: []string{"shop"}},
	{name: ClassFileNotFound, recovery: RecoveryOtherID, servers: []string{"files"}},
	{name: ClassExceedsCaptured, recovery: RecoveryOtherID, servers: []string{"shop"}},
	{name: ClassUpstreamTimeout, recovery: RecoveryRetry, servers: []string{"shop", "calendar", "repo"}, generic: true},
	{name: ClassUnavailable, recovery: RecoveryRetry, servers: []string{"calendar"}, generic: true},
	{name: ClassRepoArchived, recovery: RecoveryNone, servers: []string{"repo"}},
	{name: ClassRecipientRejects, recovery: RecoveryNone, servers: []string{"shop"}},
	{name: ClassCalendarNotFound, recovery: RecoveryOtherID, servers: []string{"calendar"}},
	{name: ClassCountryCode, recovery: RecoveryFormat, servers: []string{"shop"}},
}

// sameCall are the pairs of classes staged on the same call of a workflow:
// one task holds at most one of each pair.
var sameCall = [][2]string{{ClassTimeFormat, ClassCalendarNotFound}}

func classOf(name string) class {
	for _, c := range classes {
		if c.name == name {
			return c
		}
	}
	panic("corpus: unknown error class " + name)
}
