package journal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// IdentityFile is the file in the data path that holds the replica's id.
const IdentityFile = "replica-id"

// ReplicaID returns the id of the replica whose data path is dir: read from dir/replica-id,
// or created there on first start, so a restart on the same data path (which finds the
// journal its previous life left there) is named as the same replica in the log. With no dir
// there is no previous life to find: the id is new.
func ReplicaID(dir string) (string, error) {
	if dir == "" {
		return newID(), nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("journal: data_path: %w", err)
	}
	path := filepath.Join(dir, IdentityFile)
	if b, err := os.ReadFile(path); err == nil {
		return ParseID(string(b))
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("journal: %w", err)
	}
	// Written whole under another name, then linked in: two processes starting at once on one
	// directory (the second fails on the stores' locks anyway) never see half an id.
	id := newID()
	tmp, err := os.CreateTemp(dir, IdentityFile+".*")
	if err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("journal: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("journal: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("journal: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return ReplicaID(dir) // another process wrote it first
		}
		return "", fmt.Errorf("journal: %w", err)
	}
	return id, nil
}

// ParseID reads a replica id as the identity file holds it: 8 to 64 lowercase hex digits,
// surrounding white space ignored. It names the replica in logs and in the records of a
// shared store, so nothing else is taken.
func ParseID(s string) (string, error) {
	id := strings.TrimSpace(s)
	if len(id) < 8 || len(id) > 64 {
		return "", errors.New("journal: " + IdentityFile + ": want 8 to 64 hex digits")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", errors.New("journal: " + IdentityFile + ": want 8 to 64 hex digits")
		}
	}
	return id, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
