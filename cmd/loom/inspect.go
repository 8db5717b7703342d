package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/loomlm/loom/model/gguf"
	"github.com/loomlm/loom/model/tokenizer"
)

func init() {
	register(&command{
		name:    "inspect",
		summary: "describe a GGUF model file: architecture, sizes, tensor types, tokenizer",
		run:     runInspect,
	})
}

// modelInfo is what `loom inspect` reports; zero numbers are absent from the file.
type modelInfo struct {
	Path              string         `json:"path"`
	FileSize          int64          `json:"file_size"`
	Version           uint32         `json:"gguf_version"`
	Architecture      string         `json:"architecture"`
	Name              string         `json:"name,omitempty"`
	Parameters        int64          `json:"parameters"`
	ContextLength     uint32         `json:"context_length,omitempty"`
	EmbeddingLength   uint32         `json:"embedding_length,omitempty"`
	Layers            uint32         `json:"layers,omitempty"`
	Heads             uint32         `json:"heads,omitempty"`
	KVHeads           uint32         `json:"kv_heads,omitempty"`
	FeedForwardLength uint32         `json:"feed_forward_length,omitempty"`
	VocabSize         int            `json:"vocab_size,omitempty"`
	Tensors           int            `json:"tensors"`
	TensorTypes       map[string]int `json:"tensor_types"`
	Metadata          int            `json:"metadata_entries"`
	Tokenizer         tokenizerInfo  `json:"tokenizer"`
	// TensorList and MetadataValues are filled on request (--tensors, --metadata).
	TensorList     []tensorEntry   `json:"tensor_list,omitempty"`
	MetadataValues []metadataEntry `json:"metadata,omitempty"`
}

type tensorEntry struct {
	Name string   `json:"name"`
	Type string   `json:"type"`
	Dims []uint64 `json:"dims"`
}

type metadataEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type tokenizerInfo struct {
	// Model is "tokenizer.ggml.model" ("llama", "gpt2"), empty without a tokenizer.
	Model string `json:"model,omitempty"`
	// Kind describes the model in words.
	Kind string `json:"kind"`
	Pre  string `json:"pre,omitempty"`
	BOS  *int32 `json:"bos,omitempty"`
	EOS  *int32 `json:"eos,omitempty"`
	// Error says why loom cannot use the tokenizer, if it cannot.
	Error string `json:"error,omitempty"`
}

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", "FILE.gguf [--json] [--tensors] [--metadata]", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	listTensors := fs.Bool("tensors", false, "also list every tensor: name, type, dimensions")
	listMetadata := fs.Bool("metadata", false, "also list every metadata entry (long arrays shortened)")
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(paths) != 1 {
		fs.Usage()
		return errUsage
	}
	f, err := gguf.Open(paths[0])
	if err != nil {
		return err
	}
	defer f.Close()
	info := inspectFile(f, paths[0])
	if *listTensors {
		info.TensorList = make([]tensorEntry, len(f.Tensors))
		for i, t := range f.Tensors {
			info.TensorList[i] = tensorEntry{t.Name, t.Type.String(), t.Dims}
		}
	}
	if *listMetadata {
		info.MetadataValues = make([]metadataEntry, len(f.Metadata))
		for i, kv := range f.Metadata {
			info.MetadataValues[i] = metadataEntry{kv.Key, shortValue(kv.Value)}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	printInfo(stdout, info)
	if len(info.MetadataValues) > 0 {
		fmt.Fprintln(stdout, "\nmetadata:")
		for _, m := range info.MetadataValues {
			fmt.Fprintf(stdout, "  %s = %s\n", m.Key, m.Value)
		}
	}
	if len(info.TensorList) > 0 {
		fmt.Fprintln(stdout, "\ntensors:")
		for _, t := range info.TensorList {
			fmt.Fprintf(stdout, "  %-40s %-6s %v\n", t.Name, t.Type, t.Dims)
		}
	}
	return nil
}

func inspectFile(f *gguf.File, path string) modelInfo {
	info := modelInfo{Path: path, FileSize: f.Size, Version: f.Version, Tensors: len(f.Tensors), TensorTypes: map[string]int{}, Metadata: len(f.Metadata)}
	info.Architecture, _ = f.Architecture()
	info.Name, _ = f.String("general.name")
	for _, t := range f.Tensors {
		info.Parameters += t.Elements()
		info.TensorTypes[t.Type.String()]++
	}
	arch := func(name string) uint32 {
		v, _ := f.ArchUint32(name)
		return v
	}
	info.ContextLength = arch("context_length")
	info.EmbeddingLength = arch("embedding_length")
	info.Layers = arch("block_count")
	info.Heads = arch("attention.head_count")
	info.KVHeads = arch("attention.head_count_kv")
	if info.KVHeads == 0 {
		info.KVHeads = info.Heads
	}
	info.FeedForwardLength = arch("feed_forward_length")
	if n, err := f.ArrayLen("tokenizer.ggml.tokens"); err == nil {
		info.VocabSize = n
	} else {
		info.VocabSize = int(arch("vocab_size"))
	}
	info.Tokenizer = inspectTokenizer(f)
	return info
}

func inspectTokenizer(f *gguf.File) tokenizerInfo {
	var ti tokenizerInfo
	ti.Model, _ = f.String("tokenizer.ggml.model")
	switch ti.Model {
	case "":
		ti.Kind = "none"
		return ti
	case tokenizer.ModelSPM:
		ti.Kind = "SentencePiece-style"
	case tokenizer.ModelBPE:
		ti.Kind = "byte-level BPE"
	default:
		ti.Kind = "unknown"
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		ti.Error = err.Error()
		ti.Pre, _ = f.String("tokenizer.ggml.pre")
		return ti
	}
	ti.Pre = tok.Pre()
	if sp := tok.Special(); sp.BOS >= 0 {
		ti.BOS = &sp.BOS
	}
	if sp := tok.Special(); sp.EOS >= 0 {
		ti.EOS = &sp.EOS
	}
	return ti
}

func printInfo(w io.Writer, info modelInfo) {
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%-14s %s\n", k, fmt.Sprintf(format, args...)) }
	row("file", "%s (%s, GGUF v%d)", info.Path, byteSize(info.FileSize), info.Version)
	if info.Name != "" {
		row("name", "%s", info.Name)
	}
	row("architecture", "%s", orNone(info.Architecture))
	row("parameters", "%s (%d)", humanCount(info.Parameters), info.Parameters)
	for _, r := range []struct {
		k string
		v uint32
	}{{"context", info.ContextLength}, {"embedding", info.EmbeddingLength}, {"layers", info.Layers}, {"heads", info.Heads}, {"kv heads", info.KVHeads}, {"feed-forward", info.FeedForwardLength}} {
		if r.v != 0 {
			row(r.k, "%d", r.v)
		}
	}
	if info.VocabSize != 0 {
		row("vocab", "%d", info.VocabSize)
	}
	types := make([]string, 0, len(info.TensorTypes))
	for t := range info.TensorTypes {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		a, b := info.TensorTypes[types[i]], info.TensorTypes[types[j]]
		return a > b || (a == b && types[i] < types[j])
	})
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s ×%d", t, info.TensorTypes[t])
	}
	row("tensors", "%d%s", info.Tensors, prefixed(": ", strings.Join(parts, ", ")))
	tk := info.Tokenizer
	desc := tk.Kind
	if tk.Model != "" {
		desc = fmt.Sprintf("%s (%s)", tk.Model, tk.Kind)
	}
	if tk.Pre != "" {
		desc += ", pre-tokenizer " + tk.Pre
	}
	if tk.BOS != nil {
		desc += fmt.Sprintf(", BOS %d", *tk.BOS)
	}
	if tk.EOS != nil {
		desc += fmt.Sprintf(", EOS %d", *tk.EOS)
	}
	if tk.Error != "" {
		desc += "; not usable: " + tk.Error
	}
	row("tokenizer", "%s", desc)
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// humanCount writes n with a K, M or B suffix.
func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// byteSize writes n bytes in binary units.
func byteSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// shortValue formats a metadata value, showing at most the first 8 elements of an array.
func shortValue(v any) string {
	et, isArray := gguf.ElemTypeOf(v)
	if !isArray {
		if s, ok := v.(string); ok {
			return strconv.Quote(s)
		}
		return fmt.Sprint(v)
	}
	a := reflect.ValueOf(v)
	n := a.Len()
	parts := make([]string, 0, 9)
	for i := range min(n, 8) {
		parts = append(parts, shortValue(a.Index(i).Interface()))
	}
	if n > 8 {
		parts = append(parts, "…")
	}
	return fmt.Sprintf("[%d × %s] [%s]", n, et, strings.Join(parts, " "))
}
