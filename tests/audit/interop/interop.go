// The audit trail against the reference implementations of the formats it claims
// (tests/audit/interop.sh, audit-interop; docs/AUDIT.md "Interoperating"): Go's
// golang.org/x/mod/sumdb/note (c2sp.org/signed-note) and sumdb/tlog (RFC 6962 trees and
// proofs), and a cosignature/v1 signer and verifier written here from
// c2sp.org/tlog-cosignature (sumdb/note knows no cosignatures).
//
//	go run interop.go check HOST LOGDIR LOG.vkey WITNESS.vkey COSIGNED.note
//	    every checkpoint of LOGDIR opens with note.Open under the log's key and its root is
//	    tlog's TreeHash over the records read from the segment files; the witness's
//	    cosigned note opens under the log's key and under the witness's; every inclusion
//	    and consistency proof `HOST audit proof` prints for the sizes of the checkpoints is
//	    tlog's ProveRecord / ProveTree, byte for byte, and passes CheckRecord / CheckTree.
//	go run interop.go make LOGDIR OUTDIR
//	    a checkpoint of LOGDIR's records signed by a key made here (note.GenerateKey), with
//	    15 more signatures of other keys, a 5 kB signature of an unknown key and a
//	    cosignature of a witness made here: OUTDIR/go.note, go.vkey, go-witness.vkey, for
//	    `audit verify --vkey go.vkey --witness-vkey go-witness.vkey --checkpoint go.note`.
//
// Exit 0 when every check passed; a line per failure and exit 1 otherwise.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var failures int

func fail(format string, args ...interface{}) {
	failures++
	fmt.Printf("FAIL: "+format+"\n", args...)
}

func must(err error, what string) {
	if err != nil {
		fmt.Printf("FAIL: %s: %v\n", what, err)
		os.Exit(1)
	}
}

// The records of a log directory, from its segment files (docs/AUDIT-FORMAT.md §4: a
// 24-byte header, then frames len u32 | record | 8-byte check).
func records(dir string) [][]byte {
	segs, err := filepath.Glob(filepath.Join(dir, "seg-*.rau"))
	must(err, "glob")
	sort.Strings(segs)
	var out [][]byte
	for _, s := range segs {
		b, err := os.ReadFile(s)
		must(err, s)
		for off := 24; off+4 <= len(b); {
			n := int(binary.BigEndian.Uint32(b[off:]))
			if off+4+n+8 > len(b) {
				break
			}
			out = append(out, b[off+4:off+4+n])
			off += 4 + n + 8
		}
	}
	return out
}

// tlog's hash storage over the records.
type store struct{ hashes []tlog.Hash }

func (s *store) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = s.hashes[x]
	}
	return out, nil
}

func build(recs [][]byte) *store {
	s := &store{}
	for i, r := range recs {
		hs, err := tlog.StoredHashes(int64(i), r, s)
		must(err, "StoredHashes")
		s.hashes = append(s.hashes, hs...)
	}
	return s
}

// A cosignature/v1 key (c2sp.org/tlog-cosignature): type 0x04, a timestamped Ed25519
// signature over "cosignature/v1\ntime <t>\n" || the checkpoint text.
type cosigner struct {
	name string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
	hash uint32
}

func cosigHash(name string, pub []byte) uint32 {
	h := sha256.Sum256(append(append([]byte(name+"\n"), 0x04), pub...))
	return binary.BigEndian.Uint32(h[:4])
}

func (c *cosigner) Name() string    { return c.name }
func (c *cosigner) KeyHash() uint32 { return c.hash }
func (c *cosigner) Sign(msg []byte) ([]byte, error) {
	t := uint64(1700000000)
	m := []byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t))
	sig := binary.BigEndian.AppendUint64(nil, t)
	return append(sig, ed25519.Sign(c.priv, append(m, msg...))...), nil
}
func (c *cosigner) Verify(msg, sig []byte) bool {
	if len(sig) != 8+64 {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	m := []byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t))
	return ed25519.Verify(c.pub, append(m, msg...), sig[8:])
}

// A cosignature/v1 verifier key text: <name>+<hash>+base64(0x04 || pub).
func cosignerFromVkey(vkey string) *cosigner {
	parts := strings.SplitN(strings.TrimSpace(vkey), "+", 3)
	if len(parts) != 3 {
		must(fmt.Errorf("not name+hash+key"), "witness vkey")
	}
	k, err := base64.StdEncoding.DecodeString(parts[2])
	must(err, "witness vkey")
	if len(k) != 33 || k[0] != 0x04 {
		must(fmt.Errorf("not a cosignature/v1 key"), "witness vkey")
	}
	c := &cosigner{name: parts[0], pub: ed25519.PublicKey(k[1:])}
	c.hash = cosigHash(c.name, c.pub)
	if fmt.Sprintf("%08x", c.hash) != parts[1] {
		must(fmt.Errorf("key hash %08x, the text says %s", c.hash, parts[1]), "witness vkey")
	}
	return c
}

// origin, size and root of a checkpoint's text (c2sp.org/tlog-checkpoint).
func checkpoint(text string) (string, int64, tlog.Hash) {
	l := strings.SplitN(text, "\n", 4)
	if len(l) < 4 {
		must(fmt.Errorf("%q", text), "checkpoint text")
	}
	size, err := strconv.ParseInt(l[1], 10, 64)
	must(err, "checkpoint size")
	r, err := base64.StdEncoding.DecodeString(l[2])
	must(err, "checkpoint root")
	var h tlog.Hash
	copy(h[:], r)
	return l[0], size, h
}

func unhex(s string) tlog.Hash {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		must(fmt.Errorf("%q", s), "hex")
	}
	var h tlog.Hash
	copy(h[:], b)
	return h
}

// `HOST audit proof ...`: its leaf/root/root1/root2 and proof[i] lines.
func proof(host string, args ...string) (map[string]tlog.Hash, []tlog.Hash) {
	out, err := exec.Command(host, append([]string{"audit", "proof"}, args...)...).Output()
	must(err, "audit proof "+strings.Join(args, " "))
	named, list := map[string]tlog.Hash{}, []tlog.Hash{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		switch {
		case strings.HasPrefix(f[0], "proof["):
			list = append(list, unhex(f[1]))
		case f[0] == "leaf" || f[0] == "root" || f[0] == "root1" || f[0] == "root2":
			named[f[0]] = unhex(f[1])
		}
	}
	return named, list
}

func same(a, b []tlog.Hash) bool {
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

func check(host, dir, vkeyPath, wvkeyPath, cosignedPath string) {
	vk, err := os.ReadFile(vkeyPath)
	must(err, vkeyPath)
	v, err := note.NewVerifier(strings.TrimSpace(string(vk)))
	must(err, "note.NewVerifier (the log's key)")
	wk, err := os.ReadFile(wvkeyPath)
	must(err, wvkeyPath)
	w := cosignerFromVkey(string(wk))
	recs := records(dir)
	st := build(recs)
	notes, _ := filepath.Glob(filepath.Join(dir, "cp-*.note"))
	sizes := []int64{}
	for _, p := range notes {
		b, err := os.ReadFile(p)
		must(err, p)
		n, err := note.Open(b, note.VerifierList(v))
		if err != nil {
			fail("%s: note.Open: %v", p, err)
			continue
		}
		_, size, root := checkpoint(n.Text)
		th, err := tlog.TreeHash(size, st)
		must(err, "TreeHash")
		if th != root {
			fail("%s: tlog's root of %d records is %s, the note signs %s", p, size, th, root)
		}
		sizes = append(sizes, size)
	}
	b, err := os.ReadFile(cosignedPath)
	must(err, cosignedPath)
	if _, err := note.Open(b, note.VerifierList(v)); err != nil {
		fail("the cosigned note under the log's key: %v", err)
	}
	n, err := note.Open(b, note.VerifierList(w))
	if err != nil {
		fail("the cosigned note under the witness's key: %v", err)
	} else if len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 1 {
		fail("the cosigned note: %d verified, %d unverified signatures", len(n.Sigs),
			len(n.UnverifiedSigs))
	}
	incl, cons := 0, 0
	for _, size := range sizes {
		th, _ := tlog.TreeHash(size, st)
		for seq := int64(1); seq <= size; seq++ {
			named, got := proof(host, "inclusion", dir, fmt.Sprint(seq), fmt.Sprint(size))
			want, err := tlog.ProveRecord(size, seq-1, st)
			must(err, "ProveRecord")
			if !same(got, want) || named["root"] != th {
				fail("inclusion %d in %d: not tlog's proof or root", seq, size)
			}
			if err := tlog.CheckRecord(got, size, th, seq-1, named["leaf"]); err != nil ||
				named["leaf"] != tlog.RecordHash(recs[seq-1]) {
				fail("inclusion %d in %d: CheckRecord: %v", seq, size, err)
			}
			incl++
		}
		for s1 := int64(1); s1 <= size; s1++ {
			named, got := proof(host, "consistency", dir, fmt.Sprint(s1), fmt.Sprint(size))
			want, err := tlog.ProveTree(size, s1, st)
			must(err, "ProveTree")
			h1, _ := tlog.TreeHash(s1, st)
			if !same(got, want) || named["root1"] != h1 || named["root2"] != th {
				fail("consistency %d -> %d: not tlog's proof or roots", s1, size)
			}
			if err := tlog.CheckTree(got, size, th, s1, h1); err != nil {
				fail("consistency %d -> %d: CheckTree: %v", s1, size, err)
			}
			cons++
		}
	}
	fmt.Printf("go: %d checkpoints opened by sumdb/note with tlog's roots, the cosigned note "+
		"under both keys, %d inclusion and %d consistency proofs equal to tlog's\n",
		len(notes), incl, cons)
}

// A signature line of an unknown key: name, then base64(4-byte id || n random bytes).
func unknownSig(name string, n int) string {
	b := make([]byte, 4+n)
	_, err := rand.Read(b)
	must(err, "rand")
	return "\u2014 " + name + " " + base64.StdEncoding.EncodeToString(b) + "\n"
}

func write(path, text string) {
	must(os.WriteFile(path, []byte(text), 0o644), path)
}

func makeVectors(dir, out string) {
	recs := records(dir)
	st := build(recs)
	size := int64(len(recs))
	th, err := tlog.TreeHash(size, st)
	must(err, "TreeHash")
	origin := "ron-audit/gw-1/rejects"
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	must(err, "GenerateKey")
	s, err := note.NewSigner(skey)
	must(err, "NewSigner")
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	must(err, "ed25519")
	w := &cosigner{name: "witness.example.com/go", pub: pub, priv: priv}
	w.hash = cosigHash(w.name, pub)
	signers := []note.Signer{s, w}
	for i := 0; i < 14; i++ {
		sk, _, err := note.GenerateKey(rand.Reader, fmt.Sprintf("other-%d.example.com", i))
		must(err, "GenerateKey")
		o, err := note.NewSigner(sk)
		must(err, "NewSigner")
		signers = append(signers, o)
	}
	text := fmt.Sprintf("%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(th[:]))
	msg, err := note.Sign(&note.Note{Text: text}, signers...)
	must(err, "note.Sign")
	// a 5 kB signature of an unknown key (a post-quantum one's size), last
	all := string(msg) + unknownSig("pq.example.com/slh-dsa", 5000)
	// sumdb/note itself opens it (17 signature lines)
	v, _ := note.NewVerifier(vkey)
	if n, err := note.Open([]byte(all), note.VerifierList(v, w)); err != nil || len(n.Sigs) != 2 {
		fail("note.Open of the vectors: %v", err)
	}
	write(filepath.Join(out, "go.note"), all)
	write(filepath.Join(out, "go.vkey"), vkey+"\n")
	wvk := fmt.Sprintf("%s+%08x+%s\n", w.name, w.hash,
		base64.StdEncoding.EncodeToString(append([]byte{0x04}, pub...)))
	write(filepath.Join(out, "go-witness.vkey"), wvk)
	fmt.Printf("go: a checkpoint of %d records with %d signature lines, %d bytes\n", size,
		bytes.Count([]byte(all), []byte("\n\u2014 ")), len(all))
}

func main() {
	switch {
	case len(os.Args) == 7 && os.Args[1] == "check":
		check(os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6])
	case len(os.Args) == 4 && os.Args[1] == "make":
		makeVectors(os.Args[2], os.Args[3])
	default:
		fmt.Println("usage: interop check HOST LOGDIR LOG.vkey WITNESS.vkey COSIGNED.note | make LOGDIR OUTDIR")
		os.Exit(2)
	}
	if failures > 0 {
		os.Exit(1)
	}
}
