package diskspace

import (
	"os"
	"path/filepath"
	"sync"
)

// An Allocator allocates ahead in Badger directories (see Ahead),
// remembering for each directory's newest logs where their data ended, so
// that the next call looks for Badger's write position from there rather
// than from the file's start. It is safe for concurrent use; the zero
// Allocator is ready.
type Allocator struct {
	mu    sync.Mutex
	marks map[string]logMark // directory and extension → its newest log's mark
}

// logMark is what an Allocator knows of a log file: which file it is and
// where its first hole was (every byte before it was data). A file that
// is not the one marked (another name, inode or size) is looked at from
// its start.
type logMark struct {
	name     string
	dev, ino uint64
	size     int64
	hole     int64
}

// same reports whether m and cur mark the same file, so that what m
// knows of it holds for cur.
func (m logMark) same(cur logMark) bool {
	return m.name == cur.name && m.dev == cur.dev && m.ino == cur.ino && m.size == cur.size
}

// Ahead makes the filesystem allocate, in the newest memtable log (*.mem)
// and value log (*.vlog) of the Badger directory dir, the blocks of the
// next ahead bytes past their written data (up to each file's size), so
// that Badger's mapped writes there cannot fault. It returns an error
// wrapping ErrLow when the filesystem has no room for them. A filesystem
// without fallocate or SEEK_HOLE is left as it is.
func (a *Allocator) Ahead(dir string, ahead int64) error {
	newest, err := newestLogs(dir)
	if err != nil || len(newest) == 0 {
		return nil // not created yet, or gone: nothing to allocate
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.marks == nil {
		a.marks = map[string]logMark{}
	}
	for ext, name := range newest {
		k := dir + "\x00" + ext
		m, err := allocateFile(filepath.Join(dir, name), name, ahead, a.marks[k])
		if err != nil {
			delete(a.marks, k)
			return err
		}
		a.marks[k] = m
	}
	return nil
}

// newestLogs returns the name of dir's newest file of each extension
// .mem and .vlog.
func newestLogs(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	newest := make(map[string]string, 2)
	for _, e := range ents {
		name := e.Name()
		ext := filepath.Ext(name)
		if e.IsDir() || (ext != ".mem" && ext != ".vlog") {
			continue
		}
		// Badger names them by a zero-padded, growing file id.
		if cur, ok := newest[ext]; !ok || len(name) > len(cur) || (len(name) == len(cur) && name > cur) {
			newest[ext] = name
		}
	}
	return newest, nil
}
