package badgerdb

import "github.com/dgraph-io/badger/v4"

// KeyIterator iterates over the keys under prefix, in reverse when asked,
// without fetching values.
func KeyIterator(txn *badger.Txn, prefix []byte, reverse bool) *badger.Iterator {
	opt := badger.DefaultIteratorOptions
	opt.PrefetchValues = false
	opt.Reverse = reverse
	opt.Prefix = prefix
	return txn.NewIterator(opt)
}
