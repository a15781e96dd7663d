package errtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// stateVersion is the version of the JSON form of a Miner.
const stateVersion = 1

type stateJSON struct {
	Version int         `json:"version"`
	Options optionsJSON `json:"options"`
	Keys    []keyJSON   `json:"keys"`
}

type optionsJSON struct {
	Depth       int     `json:"depth"`
	Similarity  float64 `json:"similarity"`
	MaxChildren int     `json:"max_children"`
	MaxClusters int     `json:"max_clusters"`
	MaxTokens   int     `json:"max_tokens"`
}

type keyJSON struct {
	Key      string            `json:"key"`
	Tick     uint64            `json:"tick"`
	Clusters []clusterJSON     `json:"clusters"` // by ID
	Tree     map[int]*nodeJSON `json:"tree"`     // by token count
}

type clusterJSON struct {
	ID       string   `json:"id"`
	Tokens   []string `json:"tokens"`
	Size     int      `json:"size"`
	LastUsed uint64   `json:"last_used"`
}

type nodeJSON struct {
	Children map[string]*nodeJSON `json:"children,omitempty"`
	Clusters []string             `json:"clusters,omitempty"` // oldest first
}

// MarshalJSON returns the whole miner, options included, as JSON. The same
// state always gives the same bytes.
func (m *Miner) MarshalJSON() ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o := m.opt.withDefaults()
	st := stateJSON{
		Version: stateVersion,
		Options: optionsJSON{o.Depth, o.Similarity, o.MaxChildren, o.MaxClusters, o.MaxTokens},
		Keys:    []keyJSON{},
	}
	for key, k := range m.keys {
		kj := keyJSON{Key: key, Tick: k.tick, Clusters: []clusterJSON{}, Tree: map[int]*nodeJSON{}}
		for _, cl := range k.clusters {
			kj.Clusters = append(kj.Clusters, clusterJSON{cl.id, cl.tokens, cl.size, cl.lastUsed})
		}
		slices.SortFunc(kj.Clusters, func(a, b clusterJSON) int { return strings.Compare(a.ID, b.ID) })
		for n, root := range k.roots {
			kj.Tree[n] = root.toJSON()
		}
		st.Keys = append(st.Keys, kj)
	}
	slices.SortFunc(st.Keys, func(a, b keyJSON) int { return strings.Compare(a.Key, b.Key) })
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode miner: %w", err)
	}
	return b, nil
}

func (n *node) toJSON() *nodeJSON {
	nj := &nodeJSON{Clusters: n.ids}
	if len(n.children) > 0 {
		nj.Children = make(map[string]*nodeJSON, len(n.children))
		for t, c := range n.children {
			nj.Children[t] = c.toJSON()
		}
	}
	return nj
}

// UnmarshalJSON replaces the miner's whole state, options included, by one
// MarshalJSON returned; afterwards Add and Match behave exactly as they did on
// the saved miner. On error the miner is left unchanged.
func (m *Miner) UnmarshalJSON(data []byte) error {
	var st stateJSON
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("decode miner: %w", err)
	}
	keys, err := st.restore()
	if err != nil {
		return fmt.Errorf("restore miner: %w", err)
	}
	o := st.Options
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opt = Options{o.Depth, o.Similarity, o.MaxChildren, o.MaxClusters, o.MaxTokens}.withDefaults()
	m.keys = keys
	return nil
}

func (st *stateJSON) restore() (map[string]*keyTree, error) {
	if st.Version != stateVersion {
		return nil, fmt.Errorf("version %d, want %d", st.Version, stateVersion)
	}
	keys := make(map[string]*keyTree, len(st.Keys))
	for _, kj := range st.Keys {
		if _, dup := keys[kj.Key]; dup {
			return nil, fmt.Errorf("key %q twice", kj.Key)
		}
		k := &keyTree{tick: kj.Tick, roots: map[int]*node{}, clusters: map[string]*cluster{}}
		for _, c := range kj.Clusters {
			if _, dup := k.clusters[c.ID]; dup || c.ID == "" {
				return nil, fmt.Errorf("key %q: cluster id %q empty or twice", kj.Key, c.ID)
			}
			k.clusters[c.ID] = &cluster{id: c.ID, tokens: slices.Clone(c.Tokens), size: c.Size, lastUsed: c.LastUsed}
		}
		for n, nj := range kj.Tree {
			if nj == nil {
				return nil, fmt.Errorf("key %q: empty tree for %d tokens", kj.Key, n)
			}
			root, err := nj.restore(k, n)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w", kj.Key, err)
			}
			k.roots[n] = root
		}
		for _, cl := range k.clusters {
			if cl.leaf == nil {
				return nil, fmt.Errorf("key %q: cluster %s in no leaf", kj.Key, cl.id)
			}
		}
		keys[kj.Key] = k
	}
	return keys, nil
}

// restore rebuilds a node whose clusters have n tokens.
func (nj *nodeJSON) restore(k *keyTree, n int) (*node, error) {
	nd := &node{ids: slices.Clone(nj.Clusters)}
	for _, id := range nd.ids {
		cl := k.clusters[id]
		switch {
		case cl == nil:
			return nil, fmt.Errorf("unknown cluster %q in tree", id)
		case cl.leaf != nil:
			return nil, fmt.Errorf("cluster %s in two leaves", id)
		case len(cl.tokens) != n:
			return nil, fmt.Errorf("cluster %s of %d tokens under %d", id, len(cl.tokens), n)
		}
		cl.leaf = nd
	}
	for t, cj := range nj.Children {
		if cj == nil {
			return nil, errors.New("empty tree node")
		}
		c, err := cj.restore(k, n)
		if err != nil {
			return nil, err
		}
		if nd.children == nil {
			nd.children = map[string]*node{}
		}
		nd.children[t] = c
	}
	return nd, nil
}
