package hindsight

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by stores for an id they do not hold.
var ErrNotFound = errors.New("not found")

// ErrStoreUnavailable is wrapped by the errors of an experience store that
// could not be reached (connection refused or reset, a timeout, a server
// answering that it is unavailable), as opposed to one that answered no:
// the same operation may succeed once the store is back.
var ErrStoreUnavailable = errors.New("experience store unavailable")

// ErrConflict is returned by ExperienceStore.Put when the stored version is
// not the one the caller read (optimistic concurrency).
var ErrConflict = errors.New("version conflict")

// Query asks an experience store which experiences matter now.
//
// Empty filter fields match anything. Namespace defaults to DefaultNamespace.
type Query struct {
	Text      string `json:"text"`
	Namespace string `json:"namespace,omitempty"`
	Server    string `json:"server,omitempty"`
	Tool      string `json:"tool,omitempty"`
	TaskType  string `json:"task_type,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
	// ErrorTemplate, when set, is a ranking signal, not a filter:
	// experiences about the same error template rank above others.
	ErrorTemplate     string `json:"error_template,omitempty"`
	K                 int    `json:"k,omitempty"`                  // how many to return; 0 means 5
	IncludeSuperseded bool   `json:"include_superseded,omitempty"` // also return superseded experiences
	IncludeDeleted    bool   `json:"include_deleted,omitempty"`    // also return soft-deleted experiences
	IncludeCold       bool   `json:"include_cold,omitempty"`       // also search experiences out of the hot index
	Explain           bool   `json:"explain,omitempty"`            // fill ScoredExperience.Explain
	NoHit             bool   `json:"no_hit,omitempty"`             // do not count this query as a hit
	// IncludePinned, with Server, puts the server's pinned experiences
	// (active ones) first, beyond K, whatever their rank. The daemon's
	// search answers it; the stores ignore it.
	IncludePinned bool `json:"include_pinned,omitempty"`
}

// ScoredExperience is one search result.
type ScoredExperience struct {
	Experience
	Score   float64       `json:"score"`
	Explain *ScoreExplain `json:"explain,omitempty"`
}

// ScoreExplain shows how a search score was made.
type ScoreExplain struct {
	BM25Rank   int     `json:"bm25_rank"`   // 1-based; 0 when not matched by BM25
	VectorRank int     `json:"vector_rank"` // 1-based; 0 when not in the vector candidates
	RRF        float64 `json:"rrf"`
	Confidence float64 `json:"confidence_weight"`
	Recency    float64 `json:"recency_weight"`
	Evidence   float64 `json:"evidence_weight"`
	Hits       float64 `json:"hit_weight"`
	Cold       float64 `json:"cold_weight"`
}

// ListOptions selects experiences for listing and export.
type ListOptions struct {
	Namespace         string // "" means every namespace
	Server, Tool      string
	IncludeSuperseded bool
	IncludeDeleted    bool
	Limit             int // 0 means no limit
}

// ExperienceStore keeps experiences. The embedded (Badger) and Weaviate
// backends implement it and pass the same conformance suite
// (store/storetest).
//
// Put inserts e when no experience with its id exists in its namespace;
// otherwise it replaces it, and e.Version must equal the stored version
// (else ErrConflict). Put increments e.Version and sets UpdatedAt (and
// CreatedAt on insert) on the value it is given. Soft delete, restore and
// supersede are Puts of the changed experience.
type ExperienceStore interface {
	Put(ctx context.Context, e *Experience) error
	Get(ctx context.Context, namespace, id string) (*Experience, error)
	Search(ctx context.Context, q Query) ([]ScoredExperience, error)
	List(ctx context.Context, opt ListOptions) ([]Experience, error)
	RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error
	Close() error
}

// Embedder turns texts into vectors. Name identifies the model and is stored
// with each vector, so vectors of different embedders are never mixed.
type Embedder interface {
	Name() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
