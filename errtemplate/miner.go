package errtemplate

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight/internal/defaults"
)

// Defaults of Options.
const (
	DefaultDepth       = 4
	DefaultSimilarity  = 0.5
	DefaultMaxChildren = 100
	DefaultMaxClusters = 1000
	DefaultMaxTokens   = 64
)

// Options of a Miner. A zero or negative field means its default.
type Options struct {
	// Depth of the tree: texts are routed by token count, then by their first
	// Depth-2 tokens (never by their last one). At least 2.
	Depth int
	// Similarity is the share of equal token positions a text needs to join a
	// cluster; above 1 means 1.
	Similarity float64
	// MaxChildren bounds the children of a tree node; tokens beyond it are
	// routed to the node's "<*>" child.
	MaxChildren int
	// MaxClusters bounds the clusters per key; a new cluster beyond it evicts
	// the key's least recently used one (created or joined longest ago by Add).
	MaxClusters int
	// MaxTokens cuts longer texts to their first MaxTokens tokens.
	MaxTokens int
}

func (o Options) withDefaults() Options {
	o.Depth = max(defaults.Positive(o.Depth, DefaultDepth), 2)
	o.Similarity = min(defaults.Positive(o.Similarity, DefaultSimilarity), 1)
	o.MaxChildren = defaults.Positive(o.MaxChildren, DefaultMaxChildren)
	o.MaxClusters = defaults.Positive(o.MaxClusters, DefaultMaxClusters)
	o.MaxTokens = defaults.Positive(o.MaxTokens, DefaultMaxTokens)
	return o
}

// Cluster is one template.
type Cluster struct {
	// ID is "tpl_" and 12 hex digits of sha256(key + "\x00" + first template);
	// it never changes when the template generalizes. Should the key already
	// hold that ID (a hash collision), "\x00" and 1, 2… are appended to the
	// hashed text until the ID is free. A cluster evicted and learned again
	// gets its old ID back.
	ID string `json:"id"`
	// Template is the current template text: masked tokens joined by spaces.
	Template string `json:"template"`
	// Size counts the texts added to it.
	Size int `json:"size"`
}

// Miner groups texts per key into clusters. The zero Miner uses the default
// Options. It is safe for concurrent use.
type Miner struct {
	mu   sync.RWMutex
	opt  Options
	keys map[string]*keyTree
}

// keyTree is the tree and the clusters of one key.
type keyTree struct {
	tick     uint64 // counts Add calls; lastUsed of clusters
	roots    map[int]*node
	clusters map[string]*cluster
}

// node is a node of the tree; a leaf lists its clusters oldest first.
type node struct {
	children map[string]*node
	ids      []string
}

type cluster struct {
	id       string
	tokens   []string
	size     int
	lastUsed uint64
	leaf     *node
}

// NewMiner returns an empty Miner with opt, defaults filled in.
func NewMiner(opt Options) *Miner {
	return &Miner{opt: opt.withDefaults(), keys: map[string]*keyTree{}}
}

// Options returns the miner's options, defaults filled in.
func (m *Miner) Options() Options {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.opt.withDefaults()
}

// Add learns text under key and returns its cluster, after any
// generalisation, and whether the cluster was created or its template changed.
func (m *Miner) Add(key, text string) (c Cluster, changed bool) {
	limit := m.Options().MaxTokens
	toks := maskTokens(text, limit)
	m.mu.Lock()
	defer m.mu.Unlock()
	opt := m.opt.withDefaults()
	if opt.MaxTokens != limit { // restored meanwhile with other options
		toks = maskTokens(text, opt.MaxTokens)
	}
	if m.keys == nil {
		m.keys = map[string]*keyTree{}
	}
	k := m.keys[key]
	if k == nil {
		k = &keyTree{roots: map[int]*node{}, clusters: map[string]*cluster{}}
		m.keys[key] = k
	}
	k.tick++
	if cl := k.search(toks, opt); cl != nil {
		for i, t := range cl.tokens {
			if t != toks[i] && t != Wildcard {
				cl.tokens[i] = Wildcard
				changed = true
			}
		}
		cl.size++
		cl.lastUsed = k.tick
		return cl.public(), changed
	}
	if len(k.clusters) >= opt.MaxClusters {
		k.evict()
	}
	cl := &cluster{id: k.newID(key, toks), tokens: toks, size: 1, lastUsed: k.tick}
	k.clusters[cl.id] = cl
	k.insert(cl, opt)
	return cl.public(), true
}

// Match returns the cluster text would join under key, as it is now, without
// learning; ok is false when no cluster is similar enough.
func (m *Miner) Match(key, text string) (c Cluster, ok bool) {
	limit := m.Options().MaxTokens
	toks := maskTokens(text, limit)
	m.mu.RLock()
	defer m.mu.RUnlock()
	opt := m.opt.withDefaults()
	if opt.MaxTokens != limit {
		toks = maskTokens(text, opt.MaxTokens)
	}
	k := m.keys[key]
	if k == nil {
		return Cluster{}, false
	}
	cl := k.search(toks, opt)
	if cl == nil {
		return Cluster{}, false
	}
	return cl.public(), true
}

// Clusters returns key's clusters ordered by ID.
func (m *Miner) Clusters(key string) []Cluster {
	m.mu.RLock()
	defer m.mu.RUnlock()
	k := m.keys[key]
	if k == nil {
		return nil
	}
	out := make([]Cluster, 0, len(k.clusters))
	for _, cl := range k.clusters {
		out = append(out, cl.public())
	}
	slices.SortFunc(out, func(a, b Cluster) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (cl *cluster) public() Cluster {
	return Cluster{ID: cl.id, Template: strings.Join(cl.tokens, " "), Size: cl.size}
}

// routeLen returns how many leading tokens of a text of n tokens route it.
func routeLen(n, depth int) int {
	return max(min(depth-2, n-1), 0)
}

// isParam reports whether a token routes to the "<*>" child.
func isParam(t string) bool {
	if strings.Contains(t, Wildcard) {
		return true
	}
	for i := 0; i < len(t); i++ {
		if t[i] >= '0' && t[i] <= '9' {
			return true
		}
	}
	return false
}

// search returns the cluster toks would join, or nil.
func (k *keyTree) search(toks []string, opt Options) *cluster {
	n := k.roots[len(toks)]
	if n == nil {
		return nil
	}
	for _, t := range toks[:routeLen(len(toks), opt.Depth)] {
		next := n.children[t]
		if next == nil {
			next = n.children[Wildcard]
		}
		if next == nil {
			return nil
		}
		n = next
	}
	var best *cluster
	bestEqual, bestParams := -1, -1
	for _, id := range n.ids {
		cl := k.clusters[id]
		equal, params, ok := score(cl.tokens, toks)
		if ok && (equal > bestEqual || (equal == bestEqual && params > bestParams)) {
			best, bestEqual, bestParams = cl, equal, params
		}
	}
	if best == nil || (len(toks) > 0 && float64(bestEqual)/float64(len(toks)) < opt.Similarity) {
		return nil
	}
	return best
}

// insert puts a new cluster into the tree, adding nodes on its way.
func (k *keyTree) insert(cl *cluster, opt Options) {
	n := k.roots[len(cl.tokens)]
	if n == nil {
		n = &node{}
		k.roots[len(cl.tokens)] = n
	}
	for _, t := range cl.tokens[:routeLen(len(cl.tokens), opt.Depth)] {
		n = n.child(t, opt.MaxChildren)
	}
	n.ids = append(n.ids, cl.id)
	cl.leaf = n
}

// child returns the child t routes to, adding it if needed, as drain3 does: a
// param token goes to "<*>"; another token gets its own child while there is
// room, keeping the last place for "<*>".
func (n *node) child(t string, maxChildren int) *node {
	if c := n.children[t]; c != nil {
		return c
	}
	if n.children == nil {
		n.children = map[string]*node{}
	}
	_, hasWild := n.children[Wildcard]
	room := len(n.children)+1 < maxChildren
	if hasWild {
		room = len(n.children) < maxChildren
	}
	if !isParam(t) && room {
		c := &node{}
		n.children[t] = c
		return c
	}
	if !hasWild {
		n.children[Wildcard] = &node{}
	}
	return n.children[Wildcard]
}

// evict removes the least recently used cluster.
func (k *keyTree) evict() {
	var lru *cluster
	for _, cl := range k.clusters {
		if lru == nil || cl.lastUsed < lru.lastUsed || (cl.lastUsed == lru.lastUsed && cl.id < lru.id) {
			lru = cl
		}
	}
	if lru == nil {
		return
	}
	delete(k.clusters, lru.id)
	lru.leaf.ids = slices.DeleteFunc(lru.leaf.ids, func(id string) bool { return id == lru.id })
}

// newID returns a free cluster ID for a first template of toks under key.
func (k *keyTree) newID(key string, toks []string) string {
	base := key + "\x00" + strings.Join(toks, " ")
	text := base
	for n := 1; ; n++ {
		sum := sha256.Sum256([]byte(text))
		id := "tpl_" + hex.EncodeToString(sum[:6])
		if _, taken := k.clusters[id]; !taken {
			return id
		}
		text = base + "\x00" + strconv.Itoa(n)
	}
}
