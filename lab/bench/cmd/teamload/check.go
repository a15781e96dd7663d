//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// deltaCounts returns, over the experiences of the namespaces that have
// delta objects (deltas, hit counters, checkpoints), how many each has.
func deltaCounts(ctx context.Context, base, class string, spaces int) ([]int, error) {
	var counts []int
	for i := range spaces {
		per := map[string]int{}
		after := ""
		for {
			q := url.Values{"class": {class + "Delta"}, "tenant": {weaviate.Tenant(namespaceOf(i))}, "limit": {"1000"}}
			if after != "" {
				q.Set("after", after)
			}
			var page struct {
				Objects []struct {
					ID         string `json:"id"`
					Properties struct {
						HID string `json:"hid"`
					} `json:"properties"`
				} `json:"objects"`
			}
			if err := getJSON(ctx, base+"/v1/objects?"+q.Encode(), &page); err != nil {
				return nil, fmt.Errorf("count deltas: %w", err)
			}
			for _, o := range page.Objects {
				per[o.Properties.HID]++
			}
			if len(page.Objects) < 1000 {
				break
			}
			after = page.Objects[len(page.Objects)-1].ID
		}
		for _, n := range per {
			counts = append(counts, n)
		}
	}
	slices.Sort(counts)
	return counts, nil
}

// losses is what the checks after the run found missing.
type losses struct {
	hitsWanted, hitsStored, hitsLost int            // hits of counted searches
	editsAcked, editsLost            int            // edits and pins acknowledged
	learnt, learntLost               int            // lessons reflections stored
	same, sameCopiesMax              int            // same-moment lessons; the most live copies one has
	sameLeft                         map[string]int // same-moment lessons left with more than one live copy, by phase
	unreadable                       int            // experiences a read failed on
}

// check reads back, through a store of its own, what the run was told
// was done.
func check(ctx context.Context, st *weaviate.Store, rec *record) (losses, error) {
	l := losses{sameLeft: map[string]int{}}
	var mu sync.Mutex
	refs := map[hitRef]bool{}
	for r := range rec.hits {
		refs[r] = true
	}
	for r := range rec.edits {
		refs[r] = true
	}
	for _, x := range rec.learnt {
		refs[hitRef(x)] = true
	}
	got := map[hitRef]*hindsight.Experience{}
	work := make(chan hitRef)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for r := range work {
				e, err := st.Get(ctx, r.ns, r.id)
				mu.Lock()
				switch {
				case errors.Is(err, hindsight.ErrNotFound):
				case err != nil:
					l.unreadable++
				default:
					got[r] = e
				}
				mu.Unlock()
			}
		})
	}
	for r := range refs {
		work <- r
	}
	close(work)
	wg.Wait()
	for r, n := range rec.hits {
		l.hitsWanted += n
		if e := got[r]; e != nil {
			l.hitsStored += min(e.HitCount, n)
			l.hitsLost += max(0, n-e.HitCount)
		}
	}
	for r, n := range rec.edits {
		l.editsAcked += n
		if e := got[r]; e != nil {
			l.editsLost += max(0, n-(e.Version-1))
		}
	}
	for _, x := range rec.learnt {
		l.learnt++
		if got[hitRef(x)] == nil {
			l.learntLost++
		}
	}
	for _, s := range rec.same {
		l.same++
		list, err := st.List(ctx, hindsight.ListOptions{Namespace: s.ns, Tool: s.tool})
		if err != nil {
			return l, fmt.Errorf("list copies: %w", err)
		}
		n := 0
		for _, e := range list {
			if e.Lesson == s.lesson && !e.Deleted && e.SupersededBy == "" {
				n++
			}
		}
		l.sameCopiesMax = max(l.sameCopiesMax, n)
		if n > 1 {
			l.sameLeft[s.phase]++
		}
	}
	return l, nil
}
