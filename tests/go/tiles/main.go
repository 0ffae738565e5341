// Command tiles is an independent reader of heldout's C2SP tlog-tiles directories, built on Go's
// golang.org/x/mod/sumdb/tlog (TileHashReader, TreeHash, ProveRecord/CheckRecord, ProveTree/CheckTree) and
// golang.org/x/mod/sumdb/note (test fixture; see tests/test_tiles_go.py).
//
// It reads one JSON request on stdin and writes one JSON report on stdout:
//
//	request: {"dir": tiles directory, "vkey": note verifier key, "origin": expected origin line,
//	          "fallback": read the full tile when a partial one is absent (a reader of an older tree),
//	          "trees": [{"note": signed checkpoint, "records": [entry indexes],
//	                     "olds": [signed checkpoint of an older size]}]}
//	report:  {"trees": [{"size", "ok", "error", "records", "olds", "tiles_read"}]}
//
// For each tree the checkpoint is opened with note.Open under the verifier key and its C2SP body parsed;
// tlog.TileHashReader reads the hash tiles from the directory (tile/<L>/<N>[.p/<W>], height 8) and
// authenticates them against the signed root; tlog.TreeHash must give that root. For each record, the entry
// is read from its bundle (tile/entries/<N>[.p/<W>], big-endian uint16 length prefixes), hashed with
// tlog.RecordHash, and its tlog.ProveRecord proof (from the tiles) checked with tlog.CheckRecord; for each
// older checkpoint, tlog.ProveTree from the tiles is checked with tlog.CheckTree against both signed roots.
//
// Build without network: GO111MODULE=off GOPATH=/usr/share/gocode go build -o tiles .
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

type treeRequest struct {
	Note    string   `json:"note"`
	Records []int64  `json:"records"`
	Olds    []string `json:"olds"`
}

type request struct {
	Dir      string        `json:"dir"`
	Vkey     string        `json:"vkey"`
	Origin   string        `json:"origin"`
	Fallback bool          `json:"fallback"`
	Trees    []treeRequest `json:"trees"`
}

type treeResult struct {
	Size      int64  `json:"size"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	Records   int    `json:"records"`
	Olds      int    `json:"olds"`
	TilesRead int    `json:"tiles_read"`
}

// dirTiles serves tiles from the directory in the C2SP layout (no height element in the path).
type dirTiles struct {
	dir      string
	fallback bool
	reads    int
}

func (d *dirTiles) Height() int { return height }

// c2spPath turns Go's tile/8/L/NNN[.p/W] (tile/8/data/... for entries) into tile/L/NNN[.p/W].
func c2spPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", height))
	if strings.HasPrefix(p, "data/") {
		p = "entries/" + strings.TrimPrefix(p, "data/")
	}
	return "tile/" + p
}

// read returns the tile's bytes: the exact file, or (with fallback) the full tile cut to the width.
func (d *dirTiles) read(t tlog.Tile, unit int) ([]byte, error) {
	d.reads++
	data, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(c2spPath(t))))
	if errors.Is(err, os.ErrNotExist) && d.fallback && t.W < 1<<height {
		full := t
		full.W = 1 << height
		data, err = os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(c2spPath(full))))
		if err == nil && unit > 0 && len(data) >= t.W*unit {
			data = data[:t.W*unit]
		}
	}
	return data, err
}

func (d *dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := d.read(t, tlog.HashSize)
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (d *dirTiles) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

// entry reads entry i of a tree of size n from its bundle.
func (d *dirTiles) entry(i, n int64) ([]byte, error) {
	number := i >> height
	width := n - number<<height
	if width > 1<<height {
		width = 1 << height
	}
	data, err := d.read(tlog.Tile{H: height, L: -1, N: number, W: int(width)}, 0)
	if err != nil {
		return nil, err
	}
	want := i - number<<height
	for k := int64(0); len(data) > 0; k++ {
		if len(data) < 2 {
			return nil, fmt.Errorf("bundle %d ends inside a length", number)
		}
		size := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+size {
			return nil, fmt.Errorf("bundle %d ends inside an entry", number)
		}
		if k == want {
			return data[2 : 2+size], nil
		}
		data = data[2+size:]
	}
	return nil, fmt.Errorf("bundle %d has no entry %d", number, want)
}

// openCheckpoint verifies a signed checkpoint and parses its C2SP body (origin, size, base64 root).
func openCheckpoint(text string, verifiers note.Verifiers, origin string) (tlog.Tree, error) {
	n, err := note.Open([]byte(text), verifiers)
	if err != nil {
		return tlog.Tree{}, fmt.Errorf("note.Open: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[0] != origin {
		return tlog.Tree{}, fmt.Errorf("not a checkpoint of origin %q", origin)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return tlog.Tree{}, fmt.Errorf("bad size line %q", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return tlog.Tree{}, fmt.Errorf("bad root line %q", lines[2])
	}
	var h tlog.Hash
	copy(h[:], root)
	return tlog.Tree{N: size, Hash: h}, nil
}

func checkTree(req request, verifiers note.Verifiers, tr treeRequest) treeResult {
	tiles := &dirTiles{dir: req.Dir, fallback: req.Fallback}
	tree, err := openCheckpoint(tr.Note, verifiers, req.Origin)
	if err != nil {
		return treeResult{Error: err.Error()}
	}
	res := treeResult{Size: tree.N}
	fail := func(format string, args ...interface{}) treeResult {
		res.Error = fmt.Sprintf(format, args...)
		res.TilesRead = tiles.reads
		return res
	}
	reader := tlog.TileHashReader(tree, tiles)
	th, err := tlog.TreeHash(tree.N, reader)
	if err != nil {
		return fail("TreeHash: %v", err)
	}
	if th != tree.Hash {
		return fail("TreeHash %v is not the signed root %v", th, tree.Hash)
	}
	for _, i := range tr.Records {
		data, err := tiles.entry(i, tree.N)
		if err != nil {
			return fail("entry %d: %v", i, err)
		}
		proof, err := tlog.ProveRecord(tree.N, i, reader)
		if err != nil {
			return fail("ProveRecord(%d, %d): %v", tree.N, i, err)
		}
		if err := tlog.CheckRecord(proof, tree.N, tree.Hash, i, tlog.RecordHash(data)); err != nil {
			return fail("CheckRecord(%d, %d): %v", tree.N, i, err)
		}
		res.Records++
	}
	for _, text := range tr.Olds {
		old, err := openCheckpoint(text, verifiers, req.Origin)
		if err != nil {
			return fail("older checkpoint: %v", err)
		}
		proof, err := tlog.ProveTree(tree.N, old.N, reader)
		if err != nil {
			return fail("ProveTree(%d, %d): %v", tree.N, old.N, err)
		}
		if err := tlog.CheckTree(proof, tree.N, tree.Hash, old.N, old.Hash); err != nil {
			return fail("CheckTree(%d, %d): %v", tree.N, old.N, err)
		}
		res.Olds++
	}
	res.OK = true
	res.TilesRead = tiles.reads
	return res
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
	verifiers := note.VerifierList(verifier)
	out := struct {
		Trees []treeResult `json:"trees"`
	}{}
	for _, tr := range req.Trees {
		out.Trees = append(out.Trees, checkTree(req, verifiers, tr))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
