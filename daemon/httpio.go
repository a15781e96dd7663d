package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/traces"
)

// writeJSON answers v as JSON with status, HTML characters unescaped and
// invalid UTF-8 replaced (see validUTF8).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	_, _ = w.Write(validUTF8(buf.Bytes()))
}

// answer answers v (200) or err.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// jsonContentType is the Content-Type header of a JSON answer, shared by
// the answers that set it without copying (nothing changes it).
var jsonContentType = []string{"application/json"}

// writeError answers {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// fail answers err with the status it stands for.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, hindsight.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, hindsight.ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrUnavailable), errors.Is(err, hindsight.ErrStoreUnavailable):
		status = http.StatusServiceUnavailable
	case errors.Is(err, ErrDiskFull):
		status = http.StatusInsufficientStorage
	case errors.As(err, &mbe):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, errBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, context.Canceled):
		status = 499
	}
	if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusInsufficientStorage {
		s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, status, err.Error())
}

// errBadRequest marks bad input (status 400); a step batch that does not
// decode is one.
var errBadRequest = traces.ErrBadRequest

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, a...))
}

// maxBody bounds request bodies: a step batch or an import file.
const maxBody = 256 << 20

// decodeBody decodes a JSON request body of up to maxBody bytes into v;
// what does not decode is a bad request.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("decode body: %v", err)
	}
	return nil
}

// readSteps reads and decodes a step batch (see traces.DecodeBatch). The
// steps are views of body, a buffer of bodyPool: putBody gives it back
// once they are stored, and nothing may hold them after.
func readSteps(w http.ResponseWriter, r *http.Request) (steps traces.Batch, body *[]byte, err error) {
	body = bodyPool.Get().(*[]byte)
	if *body, err = readBody(w, r, (*body)[:0]); err != nil {
		return traces.Batch{}, body, err
	}
	steps, err = traces.DecodeBatch(*body)
	return steps, body, err
}

// bodyPool holds buffers for step batch bodies (*[]byte), so that a
// batch's body costs neither an allocation nor the clearing of one.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody bounds the buffers bodyPool keeps: a rare huge batch's is
// let go.
const maxPooledBody = 1 << 20

// putBody gives buf back to bodyPool.
func putBody(buf *[]byte) {
	if cap(*buf) <= maxPooledBody {
		*buf = (*buf)[:0]
		bodyPool.Put(buf)
	}
}

// readBody appends a request's body, up to maxBody bytes, to buf, which
// it grows to the body's length at once when the request says it.
func readBody(w http.ResponseWriter, r *http.Request, buf []byte) ([]byte, error) {
	if r.ContentLength > 0 && r.ContentLength < maxBody {
		buf = slices.Grow(buf, int(r.ContentLength)+1) // +1: EOF without growing
	} else {
		buf = slices.Grow(buf, 512)
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, badRequest("read body: %v", err)
		}
	}
}

// readAll is io.ReadAll bounded by maxBody.
func readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}
