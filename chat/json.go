package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// keyOrder remembers the order of the keys of the JSON objects a rendering decoded (tools,
// tool calls' arguments, the messages). Templates see those objects as Go maps, which have no
// order, but a template writes them back (tojson) or walks them (items), and Hugging Face's
// templates (Python dicts, or JavaScript objects in @huggingface/jinja) keep the order the
// JSON gave: the prompt a model was trained on lists a tool's "type" before its "function", a
// schema's "type" before its "properties". The filters and methods find a map's keys in
// orders, by the map's identity, while its rendering runs (register and release).
type keyOrder struct {
	keys map[unsafe.Pointer][]string
	form messageForm // how messages are written (message)
}

// orders holds the key orders of the renderings under way.
var orders = struct {
	sync.Mutex
	keys map[unsafe.Pointer][]string
}{keys: map[unsafe.Pointer][]string{}}

// register makes o's orders visible to the filters until release.
func (o *keyOrder) register() {
	orders.Lock()
	maps.Copy(orders.keys, o.keys)
	orders.Unlock()
}

func (o *keyOrder) release() {
	orders.Lock()
	for p := range o.keys {
		delete(orders.keys, p)
	}
	orders.Unlock()
}

// keysOf returns the keys of a map with string keys: in the order its JSON gave them when a
// rendering decoded it, sorted otherwise.
func keysOf(rv reflect.Value) []string {
	orders.Lock()
	keys := orders.keys[rv.UnsafePointer()]
	orders.Unlock()
	if len(keys) == rv.Len() {
		return keys
	}
	keys = make([]string, 0, rv.Len())
	for _, k := range rv.MapKeys() {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	return keys
}

// list is a list a template indexes: Python's negative indices count from the end down to
// -len (gonja's own indexing stops one short, so that a list of one has no [-1], and
// Mistral's templates, which find the last user message as user_messages[-1], would leave
// out the tools of a conversation with one user message).
type list []any

// GetItem returns the item at an integer index, negative from the end.
func (l list) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// filterList is Jinja's list, returning a list (for its indexing).
func filterList(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) > 0 || len(params.KwArgs) > 0 {
		return exec.AsValue(fmt.Errorf("list takes no arguments"))
	}
	out := list{}
	if in.IsString() {
		for _, r := range in.String() {
			out = append(out, string(r))
		}
		return exec.AsValue(out)
	}
	if in.IsDict() && !isGonjaDict(in) {
		for _, k := range keysOf(reflect.ValueOf(in.Interface())) {
			out = append(out, k)
		}
		return exec.AsValue(out)
	}
	in.Iterate(func(idx, count int, key, value *exec.Value) bool {
		out = append(out, key.Interface())
		return true
	}, func() {})
	return exec.AsValue(out)
}

func isGonjaDict(v *exec.Value) bool {
	switch v.Interface().(type) {
	case exec.Dict, *exec.Dict:
		return true
	}
	return false
}

// items returns the key and value pairs of a map in keysOf's order.
func items(v any) (list, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map || rv.Type().Key().Kind() != reflect.String {
		return nil, false
	}
	var out list
	for _, k := range keysOf(rv) {
		out = append(out, list{k, rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface()})
	}
	return out, true
}

// filterItems is Jinja's items, in keysOf's order.
func filterItems(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() {
		return exec.AsValue(list{})
	}
	if out, ok := items(in.Interface()); ok {
		return exec.AsValue(out)
	}
	return gonjaItems(e, in, params)
}

// gonjaItems is gonja's own items filter (for its dict literals, lists and errors).
var gonjaItems, _ = gonja.DefaultEnvironment.Filters.Get("items")

// dictMethods are the methods of mappings: gonja's, with keys, values and items in keysOf's
// order.
func dictMethods() *exec.MethodSet[map[string]any] {
	own := map[string]exec.Method[map[string]any]{
		"items": func(self map[string]any, sv *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.Args) > 0 {
				return nil, fmt.Errorf("items() takes no arguments")
			}
			out, _ := items(sv.Interface())
			return out, nil
		},
		"keys": func(self map[string]any, sv *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.Args) > 0 {
				return nil, fmt.Errorf("keys() takes no arguments")
			}
			out := list{}
			for _, k := range keysOf(reflect.ValueOf(sv.Interface())) {
				out = append(out, k)
			}
			return out, nil
		},
		"values": func(self map[string]any, sv *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.Args) > 0 {
				return nil, fmt.Errorf("values() takes no arguments")
			}
			rv := reflect.ValueOf(sv.Interface())
			out := list{}
			for _, k := range keysOf(rv) {
				out = append(out, rv.MapIndex(reflect.ValueOf(k)).Interface())
			}
			return out, nil
		},
	}
	for _, name := range []string{"sort", "get", "pop", "setdefault", "update", "copy", "clear"} {
		if m, ok := gonja.DefaultEnvironment.Methods.Dict.Get(name); ok {
			own[name] = m
		}
	}
	return exec.NewMethodSet(own)
}

// decode decodes JSON text into the values templates index (maps, lists, strings, int64 for
// integers, float64 for other numbers, bools, nil), recording each object's key order.
func (o *keyOrder) decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := o.value(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func (o *keyOrder) value(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			var keys []string
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := o.value(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := m[k]; !dup {
					keys = append(keys, k)
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			o.keys[reflect.ValueOf(m).UnsafePointer()] = keys
			return m, nil
		case '[':
			l := list{}
			for dec.More() {
				v, err := o.value(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	}
	return tok, nil // string, bool or nil
}

// message is m as a template sees it.
func (o *keyOrder) message(m Message) map[string]any {
	out := map[string]any{"role": m.Role, "content": m.Content}
	keys := []string{"role", "content"}
	if m.NoContent && o.form.noneContent {
		out["content"] = nil
	}
	if len(m.ToolCalls) > 0 {
		calls := make(list, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			var args any = c.Arguments
			if v, err := o.decode([]byte(c.Arguments)); err == nil && !o.form.textArguments {
				args = v
			}
			fn := map[string]any{"name": c.Name, "arguments": args}
			o.keys[reflect.ValueOf(fn).UnsafePointer()] = []string{"name", "arguments"}
			call := map[string]any{"type": "function", "function": fn}
			ck := []string{"type", "function"}
			if c.ID != "" {
				call["id"] = c.ID
				ck = []string{"id", "type", "function"}
			}
			o.keys[reflect.ValueOf(call).UnsafePointer()] = ck
			calls[i] = call
		}
		out["tool_calls"] = calls
		keys = append(keys, "tool_calls")
	}
	if m.ReasoningContent != "" {
		out["reasoning_content"] = m.ReasoningContent
		keys = append(keys, "reasoning_content")
	}
	if m.ToolCallID != "" {
		out["tool_call_id"] = m.ToolCallID
		keys = append(keys, "tool_call_id")
	}
	if m.Name != "" {
		out["name"] = m.Name
		keys = append(keys, "name")
	}
	o.keys[reflect.ValueOf(out).UnsafePointer()] = keys
	return out
}

// filterToJSON is tojson as Hugging Face's chat templates have it (transformers' own filter,
// and @huggingface/jinja's): Python's separators (", " and ": ", or "," and ": " with an
// indent), text other than ASCII written as it is, objects' keys in the order their JSON gave
// them (keyOrder; other maps sorted). gonja's own tojson writes Go's compact JSON with sorted
// keys, so a tool written into a prompt would not be the text the model was trained on.
func filterToJSON(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	if v, ok := params.KwArgs["indent"]; ok && !v.IsNil() {
		if !v.IsInteger() {
			return exec.AsValue(fmt.Errorf("tojson: indent must be an integer, not %s", v.String()))
		}
		indent = v.Integer()
	} else if len(params.Args) > 0 && params.Args[0].IsInteger() {
		indent = params.Args[0].Integer()
	}
	var b strings.Builder
	if err := writeJSON(&b, in.Interface(), indent, 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	return exec.AsSafeValue(b.String())
}

// writeJSON writes v as filterToJSON does.
func writeJSON(b *strings.Builder, v any, indent, depth int) error {
	newline := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	sep := ", "
	if indent >= 0 {
		sep = ","
	}
	writeObject := func(keys []string, get func(string) any) error {
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(sep)
			}
			newline(depth + 1)
			writeString(b, k)
			b.WriteString(": ")
			if err := writeJSON(b, get(k), indent, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
		return nil
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
		return nil
	case *exec.Value:
		return writeJSON(b, t.Interface(), indent, depth)
	case bool:
		b.WriteString(strconv.FormatBool(t))
		return nil
	case string:
		writeString(b, t)
		return nil
	case exec.Dict:
		return writeJSON(b, &t, indent, depth)
	case *exec.Dict:
		keys := make([]string, len(t.Pairs))
		vals := map[string]any{}
		for i, p := range t.Pairs {
			keys[i] = p.Key.String()
			vals[keys[i]] = p.Value.Interface()
		}
		return writeObject(keys, func(k string) any { return vals[k] })
	case float32:
		return writeJSON(b, float64(t), indent, depth)
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return fmt.Errorf("%v is not a JSON number", t)
		}
		n, err := json.Marshal(t) // ECMAScript's number format, as JSON.stringify writes it
		if err != nil {
			return err
		}
		b.Write(n)
		return nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
		return nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		return writeObject(keysOf(rv), func(k string) any { return rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface() })
	case reflect.Slice, reflect.Array:
		if rv.Len() == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := 0; i < rv.Len(); i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			newline(depth + 1)
			if err := writeJSON(b, rv.Index(i).Interface(), indent, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
		return nil
	}
	n, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Write(n)
	return nil
}

// writeString writes s as JSON.stringify does: quotes, backslashes and control characters
// escaped, everything else as it is.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}
