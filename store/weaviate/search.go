package weaviate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/hindsight-proxy/hindsight/store/tokenize"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/filters"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/graphql"
	"github.com/weaviate/weaviate/entities/models"
)

// where builds the query's filter (nil when nothing is filtered).
func (s *Store) where(q *hindsight.Query, now time.Time) *filters.WhereBuilder {
	var ops []*filters.WhereBuilder
	eq := func(path, v string) {
		if v != "" {
			ops = append(ops, filters.Where().WithPath([]string{path}).WithOperator(filters.Equal).WithValueText(v))
		}
	}
	eq("server", q.Server)
	eq("tool", q.Tool)
	eq("taskType", q.TaskType)
	eq("errorCode", q.ErrorCode)
	if !q.IncludeSuperseded {
		ops = append(ops, filters.Where().WithPath([]string{"superseded"}).WithOperator(filters.Equal).WithValueBoolean(false))
	}
	if !q.IncludeDeleted {
		ops = append(ops, filters.Where().WithPath([]string{"deleted"}).WithOperator(filters.Equal).WithValueBoolean(false))
	}
	if !q.IncludeCold {
		ca := s.opt.ColdAfter
		if ca <= 0 {
			ca = rank.DefaultColdAfter
		}
		ops = append(ops, filters.Where().WithPath([]string{"lastActive"}).WithOperator(filters.GreaterThan).
			WithValueInt(now.Add(-ca).Unix()))
	}
	switch len(ops) {
	case 0:
		return nil
	case 1:
		return ops[0]
	}
	return filters.Where().WithOperator(filters.And).WithOperands(ops)
}

// Search runs one hybrid query in q's namespace's tenant and ranks the
// result with store/rank; hits are recorded unless q.NoHit. Results carry
// no vectors (fetching 100 of them costs more than the query); Get has them.
func (s *Store) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	ns := rank.Namespace(q.Namespace)
	ok, err := s.hasTenant(ctx, ns, false)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	if !ok {
		return nil, nil
	}
	now := s.now()
	// Weaviate's ranked fusion weighs its keyword and vector sets 1−α and
	// α: the same proportions as store/rank's arms, so that the 100
	// candidates it keeps are the ones rank would rank best.
	opt := s.opt.ForEmbedder(s.emb.Name())
	bw, vw := opt.ArmWeights()
	alpha := float32(vw / (bw + vw))
	get := s.c.GraphQL().Get().WithClassName(s.class).WithTenant(Tenant(ns)).WithLimit(rank.Candidates).
		WithFields(graphql.Field{Name: "doc"}, graphql.Field{Name: "_additional", Fields: []graphql.Field{
			{Name: "id"}, {Name: "explainScore"}}})
	if w := s.where(&q, now); w != nil {
		get = get.WithWhere(w)
	}
	text := strings.TrimSpace(q.Text)
	if text != "" {
		terms := strings.Join(tokenize.IndexTerms(nil, text), " ")
		if terms == "" {
			terms = text
		}
		h := s.c.GraphQL().HybridArgumentBuilder().WithQuery(terms).WithProperties([]string{"terms"}).
			WithFusionType(graphql.Ranked)
		if s.stale {
			alpha = 0
		} else {
			vs, err := s.emb.Embed(ctx, []string{text})
			if err != nil {
				return nil, fmt.Errorf("search experiences: embed query: %w", err)
			}
			h = h.WithVector(vs[0])
		}
		get = get.WithHybrid(h.WithAlpha(alpha))
	} else {
		get = get.WithSort(graphql.Sort{Path: []string{"created"}, Order: graphql.Desc})
	}
	if s.repl.cl != "" {
		get = get.WithConsistencyLevel(s.repl.cl)
	}
	resp, err := s.query(ctx, get)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	cands, err := s.candidates(resp, &q, text != "", alpha, now)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	res := opt.Fuse(&q, cands, now)
	if !q.NoHit && len(res) > 0 {
		ids := make([]string, len(res))
		for i := range res {
			ids[i] = res[i].ID
		}
		if err := s.RecordHits(ctx, ns, ids, now); err != nil {
			s.log.Warn("record experience hits", "err", err)
		}
	}
	return res, nil
}

type hit struct {
	Doc        string `json:"doc"`
	Additional struct {
		ID           string    `json:"id"`
		Vector       []float32 `json:"vector"`
		ExplainScore string    `json:"explainScore"`
	} `json:"_additional"`
}

// candidates decodes a Get response and recovers each result's BM25 and
// vector rank from the explanation of a hybrid query run with alpha.
func (s *Store) candidates(resp *models.GraphQLResponse, q *hindsight.Query, hybrid bool, alpha float32, now time.Time) ([]rank.Candidate, error) {
	get, _ := resp.Data["Get"].(map[string]any)
	raw, err := json.Marshal(get[s.class])
	if err != nil {
		return nil, err
	}
	var hits []hit
	if err := json.Unmarshal(raw, &hits); err != nil {
		return nil, fmt.Errorf("decode results: %w", err)
	}
	var out []rank.Candidate
	for i, h := range hits {
		e := new(hindsight.Experience)
		if err := json.Unmarshal([]byte(h.Doc), e); err != nil {
			return nil, fmt.Errorf("decode experience: %w", err)
		}
		e.Vector = h.Additional.Vector
		if !s.opt.Match(q, e, now) {
			continue
		}
		c := rank.Candidate{Exp: e}
		if hybrid {
			c.BM25Rank, c.VectorRank = ranks(h.Additional.ExplainScore, alpha)
		} else {
			c.BM25Rank = i + 1
		}
		if c.BM25Rank > 0 || c.VectorRank > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

var contribRE = regexp.MustCompile(`Result Set (\w+)[^\n]*?contributed ([0-9.eE+-]+) to the score`)

// ranks reads the 1-based keyword and vector ranks from Weaviate's ranked
// fusion explanation of a hybrid query run with alpha: result i (0-based)
// of a set weighted w contributes w/(i+60), where the keyword set weighs
// 1−alpha and the vector set alpha.
func ranks(explain string, alpha float32) (bm25, vector int) {
	a := float64(alpha)
	for _, m := range contribRE.FindAllStringSubmatch(explain, -1) {
		var w float64
		switch {
		case strings.HasPrefix(m[1], "keyword"), strings.HasPrefix(m[1], "bm25"):
			w = 1 - a
		case strings.HasPrefix(m[1], "vector"):
			w = a
		default:
			continue
		}
		c, err := strconv.ParseFloat(m[2], 64)
		if err != nil || !(c > 0) || !(w > 0) || w/c > 1e6 {
			continue
		}
		r := max(int(math.Round(w/c))-60+1, 1)
		if strings.HasPrefix(m[1], "vector") {
			vector = r
		} else {
			bm25 = r
		}
	}
	return bm25, vector
}

// eachObject calls fn with every experience object of tenants, 500 read
// at a time.
func (s *Store) eachObject(ctx context.Context, tenants []string, fn func(*models.Object) error) error {
	for _, t := range tenants {
		after := ""
		for {
			g := s.c.Data().ObjectsGetter().WithClassName(s.class).WithTenant(t).WithLimit(500)
			if after != "" {
				g = g.WithAfter(after)
			}
			if s.repl.cl != "" {
				g = g.WithConsistencyLevel(s.repl.cl)
			}
			var objs []*models.Object
			err := s.retry(ctx, func() (err error) {
				objs, err = g.Do(ctx)
				return err
			})
			if err != nil {
				return err
			}
			for _, o := range objs {
				if err := fn(o); err != nil {
					return err
				}
			}
			if len(objs) < 500 {
				break
			}
			after = string(objs[len(objs)-1].ID)
		}
	}
	return nil
}

// allTenants returns the collection's tenants.
func (s *Store) allTenants(ctx context.Context) ([]string, error) {
	var ts []models.Tenant
	err := s.retry(ctx, func() (err error) {
		ts, err = s.c.Schema().TenantsGetter().WithClassName(s.class).Do(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out, nil
}

// List returns experiences in creation order (then namespace and id).
func (s *Store) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	var tenants []string
	if opt.Namespace != "" {
		ok, err := s.hasTenant(ctx, opt.Namespace, false)
		if err != nil {
			return nil, fmt.Errorf("list experiences: %w", err)
		}
		if ok {
			tenants = []string{Tenant(opt.Namespace)}
		}
	} else {
		var err error
		if tenants, err = s.allTenants(ctx); err != nil {
			return nil, fmt.Errorf("list experiences: %w", err)
		}
	}
	var out []hindsight.Experience
	err := s.eachObject(ctx, tenants, func(o *models.Object) error {
		e, err := decode(o.Properties)
		if err != nil {
			return err
		}
		switch {
		case opt.Namespace != "" && e.Namespace != opt.Namespace,
			opt.Server != "" && e.Server != opt.Server,
			opt.Tool != "" && e.Tool != opt.Tool,
			e.SupersededBy != "" && !opt.IncludeSuperseded,
			e.Deleted && !opt.IncludeDeleted:
			return nil
		}
		out = append(out, *e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list experiences: %w", err)
	}
	return store.ListOrder(out, opt.Limit), nil
}
