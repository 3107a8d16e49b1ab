package store

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// MigrateReport says what a migration did, per bucket.
type MigrateReport struct {
	// Copied records were written to the target; Present ones were there
	// already, identical.
	Copied, Present map[string]int
}

// Total is the number of records the target now holds from the source.
func (r MigrateReport) Total() int {
	n := 0
	for _, b := range dataBuckets {
		n += r.Copied[b] + r.Present[b]
	}
	return n
}

// MigratedBuckets names the kinds of records a migration copies.
func MigratedBuckets() []string { return slices.Clone(dataBuckets) }

// ConflictError refuses a migration into a target that holds records the
// source does not, or holds differently: merging two edges' states could
// hand one address to two owners, so it is never done.
type ConflictError struct {
	// Examples names a few of the conflicting records (bucket/key).
	Examples []string
	Count    int
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the target store already holds %d record(s) that differ from the source or are not in it (%s): "+
		"migrate into an empty etcd prefix (--etcd-prefix), or delete the target's keys first", e.Count, strings.Join(e.Examples, ", "))
}

// migrateBatch bounds one target transaction: etcd refuses more than 128
// operations in one, and every bucket written adds its mark.
const migrateBatch = 100

// MigrateTo copies every record of s (keys, reservations, claims, secrets'
// metadata and sealed data, byte for byte) into dst. Secrets stay sealed:
// they open with the same keyring on the target. It may run again: records
// the target holds identical are left alone, so an interrupted migration
// resumes, and a finished one reports everything present. A target that
// holds anything else is refused with a *ConflictError before anything is
// written.
func (s *Store) MigrateTo(dst *Store) (MigrateReport, error) {
	rep := MigrateReport{Copied: map[string]int{}, Present: map[string]int{}}
	type rec struct {
		bucket, key string
		value       []byte
	}
	read := func(st *Store) (map[string]rec, error) {
		out := map[string]rec{}
		err := st.be.view(func(tx tx) error {
			for _, b := range dataBuckets {
				if err := tx.each(b, "", func(k string, v []byte) error {
					out[b+"/"+k] = rec{b, k, v}
					return nil
				}); err != nil {
					return fmt.Errorf("reading %s: %w", b, err)
				}
			}
			return nil
		})
		return out, err
	}
	src, err := read(s)
	if err != nil {
		return rep, fmt.Errorf("reading the source store: %w", err)
	}
	have, err := read(dst)
	if err != nil {
		return rep, fmt.Errorf("reading the target store: %w", err)
	}
	conflict := &ConflictError{}
	for id, r := range have {
		if sr, ok := src[id]; !ok || !bytes.Equal(sr.value, r.value) {
			conflict.Count++
			if len(conflict.Examples) < 5 {
				conflict.Examples = append(conflict.Examples, id)
			}
		}
	}
	if conflict.Count > 0 {
		slices.Sort(conflict.Examples)
		return rep, conflict
	}
	var todo []rec
	ids := make([]string, 0, len(src))
	for id := range src {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := src[id]
		if _, ok := have[id]; ok {
			rep.Present[r.bucket]++
			continue
		}
		todo = append(todo, r)
	}
	for len(todo) > 0 {
		chunk := todo[:min(migrateBatch, len(todo))]
		todo = todo[len(chunk):]
		err := dst.write(func(tx tx) error {
			for _, r := range chunk {
				// Created only where absent: a record another writer made
				// meanwhile is a conflict, not something to overwrite.
				cur, err := tx.get(r.bucket, r.key)
				if err != nil {
					return err
				}
				if cur != nil && !bytes.Equal(cur, r.value) {
					return &ConflictError{Examples: []string{r.bucket + "/" + r.key}, Count: 1}
				}
				if err := tx.put(r.bucket, r.key, r.value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("writing to the target store (%d record(s) copied so far; run again to resume): %w", rep.Total(), err)
		}
		for _, r := range chunk {
			rep.Copied[r.bucket]++
		}
	}
	return rep, nil
}
