package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/lakemeta/lake/metastore"
)

// IsLoopback reports whether a listen address (HOST:PORT) accepts
// connections from this machine only: a loopback IP or "localhost". An
// empty host (all interfaces) and every other name are not loopback; a name
// is not resolved, since what it resolves to may change after the check.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%w: listen address %q: %v (want HOST:PORT, such as 127.0.0.1:7070)", metastore.ErrInvalidArgument, addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// CheckListen refuses to serve on an address reachable from other machines
// without a token: the API can write and delete every key.
func CheckListen(addr, token string) error {
	loop, err := IsLoopback(addr)
	if err != nil {
		return err
	}
	if !loop && token == "" {
		return fmt.Errorf("%w: listen address %q is not loopback: a token is required (--token-file F), or listen on 127.0.0.1", metastore.ErrInvalidArgument, addr)
	}
	return nil
}

// maxNodeIDLen bounds a node id; it is a label value and a log field.
const maxNodeIDLen = 128

// ValidateNodeID returns nil if id is usable as a node id: 1 to 128 bytes of
// letters, digits, '.', '_' and '-'.
func ValidateNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDLen {
		return fmt.Errorf("%w: node id must be 1 to %d characters, got %d", metastore.ErrInvalidArgument, maxNodeIDLen, len(id))
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: node id %q: only letters, digits, '.', '_' and '-' are allowed", metastore.ErrInvalidArgument, id)
		}
	}
	return nil
}

// NodeIDFile returns the file that keeps the node id of a node serving the
// bolt file at boltPath: beside it, so that the id follows the data.
func NodeIDFile(boltPath string) string { return boltPath + ".node-id" }

// LoadOrCreateNodeID returns the node id kept in file, creating the file
// with a new random id ("node-" and 16 hex digits) if it does not exist. The
// id is written to a temporary file and renamed into place, so a crash
// never leaves a half-written id; if two nodes race, both read the winner's.
func LoadOrCreateNodeID(file string) (string, error) {
	if id, err := readNodeID(file); err == nil || !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it)
	id := "node-" + hex.EncodeToString(b[:])
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp*")
	if err != nil {
		return "", fmt.Errorf("lake: node id file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("lake: node id file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("lake: node id file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("lake: node id file: %w", err)
	}
	// Link, not rename: it fails if another node created the file first,
	// and then that node's id is the one.
	if err := os.Link(tmp.Name(), file); err != nil && !errors.Is(err, os.ErrExist) {
		// A file system without hard links: rename, which replaces a
		// file created in between (a race of two first starts at once).
		if err := os.Rename(tmp.Name(), file); err != nil {
			return "", fmt.Errorf("lake: node id file: %w", err)
		}
	}
	return readNodeID(file)
}

func readNodeID(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("lake: node id file: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if err := ValidateNodeID(id); err != nil {
		return "", fmt.Errorf("lake: node id file %s: %w", file, err)
	}
	return id, nil
}

// DeriveNodeID returns a stable node id for a node whose store has no file
// to keep one beside (DynamoDB): the host name and a short hash of the host
// name and the listen address, so two nodes on one host differ and a
// restart keeps its id.
func DeriveNodeID(hostname, listen string) string {
	sum := sha256.Sum256([]byte(hostname + "\x00" + listen))
	host := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			return c
		}
		return '-'
	}, hostname)
	if host == "" {
		host = "node"
	}
	if len(host) > 64 {
		host = host[:64]
	}
	return host + "-" + hex.EncodeToString(sum[:4])
}
