// Command verifier is an independent check of heldout's ledger formats, built on Go's
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog (test fixture; see tests/test_ledger_go.py).
//
// It reads one JSON request on stdin and writes one JSON report on stdout:
//
//	request: {"vkey": note verifier key, "origin": expected origin line, "skey": optional signer key,
//	          "entries": [base64 entry bytes, in index order],
//	          "checkpoints": [signed note text],
//	          "inclusion": [{"index", "size", "leaf", "root", "proof": [base64]}],
//	          "consistency": [{"old", "new", "old_root", "new_root", "proof": [base64]}]}
//	report:  one result per checkpoint, inclusion and consistency item: {"ok", "error", ...}
//
// Checkpoints are opened with note.Open under the verifier key, their body parsed as a C2SP
// tlog-checkpoint, and their root compared with tlog.TreeHash over the entries (stored hashes
// built with tlog.StoredHashes). With "skey", note.Sign re-signs each body so the caller can compare
// notes byte for byte. Inclusion proofs go through tlog.CheckRecord (leaf hash from tlog.RecordHash
// of the raw entry) and are compared with tlog.ProveRecord; consistency proofs go through
// tlog.CheckTree and are compared with tlog.ProveTree.
//
// Build without network: GO111MODULE=off GOPATH=/usr/share/gocode go build -o verifier .
package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusionItem struct {
	Index int64    `json:"index"`
	Size  int64    `json:"size"`
	Leaf  []byte   `json:"leaf"`
	Root  []byte   `json:"root"`
	Proof [][]byte `json:"proof"`
}

type consistencyItem struct {
	Old     int64    `json:"old"`
	New     int64    `json:"new"`
	OldRoot []byte   `json:"old_root"`
	NewRoot []byte   `json:"new_root"`
	Proof   [][]byte `json:"proof"`
}

type request struct {
	Vkey        string            `json:"vkey"`
	Origin      string            `json:"origin"`
	Skey        string            `json:"skey"`
	Entries     [][]byte          `json:"entries"`
	Checkpoints []string          `json:"checkpoints"`
	Inclusion   []inclusionItem   `json:"inclusion"`
	Consistency []consistencyItem `json:"consistency"`
}

type checkpointResult struct {
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	Size     int64  `json:"size"`
	Root     string `json:"root"`
	GoRoot   string `json:"go_root"`
	GoSigned string `json:"go_signed,omitempty"`
}

type proofResult struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	SameAsGo  bool   `json:"same_as_go"`
	GoProofOK bool   `json:"go_proof_ok"`
}

type report struct {
	Checkpoints []checkpointResult `json:"checkpoints"`
	Inclusion   []proofResult      `json:"inclusion"`
	Consistency []proofResult      `json:"consistency"`
}

// memory holds tlog's stored hashes for the entries, in storage-index order.
type memory []tlog.Hash

func (m *memory) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(*m)) {
			return nil, fmt.Errorf("stored hash %d not present", x)
		}
		out[i] = (*m)[x]
	}
	return out, nil
}

func toHash(b []byte) (tlog.Hash, error) {
	var h tlog.Hash
	if len(b) != tlog.HashSize {
		return h, fmt.Errorf("hash is %d bytes, want %d", len(b), tlog.HashSize)
	}
	copy(h[:], b)
	return h, nil
}

func toHashes(list [][]byte) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, b := range list {
		h, err := toHash(b)
		if err != nil {
			return nil, fmt.Errorf("proof[%d]: %v", i, err)
		}
		out[i] = h
	}
	return out, nil
}

func equalHashes(a []tlog.Hash, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parseCheckpoint parses a C2SP tlog-checkpoint body: origin, size, base64 root, optional extensions.
func parseCheckpoint(text, origin string) (int64, tlog.Hash, error) {
	var zero tlog.Hash
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return 0, zero, errors.New("checkpoint has fewer than 3 lines")
	}
	if lines[0] != origin {
		return 0, zero, fmt.Errorf("origin %q, want %q", lines[0], origin)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return 0, zero, fmt.Errorf("bad size line %q", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil {
		return 0, zero, fmt.Errorf("bad root line: %v", err)
	}
	root, err := toHash(raw)
	return size, root, err
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "bad request:", err)
		os.Exit(2)
	}
	verifier, err := note.NewVerifier(req.Vkey)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad verifier key:", err)
		os.Exit(2)
	}
	var signer note.Signer
	if req.Skey != "" {
		if signer, err = note.NewSigner(req.Skey); err != nil {
			fmt.Fprintln(os.Stderr, "bad signer key:", err)
			os.Exit(2)
		}
	}

	var stored memory
	for i, entry := range req.Entries {
		hashes, err := tlog.StoredHashes(int64(i), entry, &stored)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stored hashes:", err)
			os.Exit(2)
		}
		stored = append(stored, hashes...)
	}
	n := int64(len(req.Entries))

	var out report
	out.Checkpoints = []checkpointResult{}
	out.Inclusion = []proofResult{}
	out.Consistency = []proofResult{}
	for _, text := range req.Checkpoints {
		res := checkpointResult{}
		opened, err := note.Open([]byte(text), note.VerifierList(verifier))
		if err != nil {
			res.Error = "note: " + err.Error()
			out.Checkpoints = append(out.Checkpoints, res)
			continue
		}
		size, root, err := parseCheckpoint(opened.Text, req.Origin)
		res.Size, res.Root = size, root.String()
		if err != nil {
			res.Error = err.Error()
		} else if size < 1 || size > n {
			res.Error = fmt.Sprintf("size %d outside the %d entries", size, n)
		} else if goRoot, err := tlog.TreeHash(size, &stored); err != nil {
			res.Error = "tree hash: " + err.Error()
		} else {
			res.GoRoot = goRoot.String()
			if goRoot != root {
				res.Error = "root differs from tlog.TreeHash over the entries"
			} else {
				res.OK = true
			}
		}
		if signer != nil {
			signed, err := note.Sign(&note.Note{Text: opened.Text}, signer)
			if err == nil {
				res.GoSigned = string(signed)
			}
		}
		out.Checkpoints = append(out.Checkpoints, res)
	}

	for _, item := range req.Inclusion {
		res := proofResult{}
		proof, err := toHashes(item.Proof)
		root, err2 := toHash(item.Root)
		if err == nil {
			err = err2
		}
		if err == nil {
			err = tlog.CheckRecord(tlog.RecordProof(proof), item.Size, root, item.Index, tlog.RecordHash(item.Leaf))
		}
		if err != nil {
			res.Error = err.Error()
		} else {
			res.OK = true
		}
		if item.Size >= 1 && item.Size <= n && item.Index >= 0 && item.Index < item.Size {
			if goProof, err := tlog.ProveRecord(item.Size, item.Index, &stored); err == nil {
				res.SameAsGo = equalHashes(goProof, proof)
				goRoot, _ := tlog.TreeHash(item.Size, &stored)
				res.GoProofOK = tlog.CheckRecord(goProof, item.Size, goRoot, item.Index,
					stored[tlog.StoredHashIndex(0, item.Index)]) == nil
			}
		}
		out.Inclusion = append(out.Inclusion, res)
	}

	for _, item := range req.Consistency {
		res := proofResult{}
		proof, err := toHashes(item.Proof)
		oldRoot, err2 := toHash(item.OldRoot)
		newRoot, err3 := toHash(item.NewRoot)
		for _, e := range []error{err2, err3} {
			if err == nil {
				err = e
			}
		}
		if err == nil {
			err = tlog.CheckTree(tlog.TreeProof(proof), item.New, newRoot, item.Old, oldRoot)
		}
		if err != nil {
			res.Error = err.Error()
		} else {
			res.OK = true
		}
		if item.Old >= 1 && item.Old <= item.New && item.New <= n {
			if goProof, err := tlog.ProveTree(item.New, item.Old, &stored); err == nil {
				res.SameAsGo = equalHashes(goProof, proof)
				goOld, _ := tlog.TreeHash(item.Old, &stored)
				goNew, _ := tlog.TreeHash(item.New, &stored)
				res.GoProofOK = tlog.CheckTree(goProof, item.New, goNew, item.Old, goOld) == nil
			}
		}
		out.Consistency = append(out.Consistency, res)
	}

	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "write report:", err)
		os.Exit(2)
	}
}
