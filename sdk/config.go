package sdk

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Configurable parts receive the plugin's [plugins.config] table when the host starts the
// plugin, and validate it there. Errors recorded with Config.Errorf (or returned) are reported
// by the host against the pipeline line of the key: "p.toml:12: plugins[0].config.words:
// must not be empty".
type Configurable interface {
	Configure(cfg *Config) error
}

// ConfigError is one problem with a config key.
type ConfigError struct {
	Key     string
	Message string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return e.Message
	}
	return e.Key + ": " + e.Message
}

// Config is the plugin's [plugins.config] table with typed getters. A getter given a key of
// the wrong type records an error naming the key and returns the default. Keys no part reads
// are reported as unknown.
type Config struct {
	plugin string
	values map[string]any
	read   map[string]bool
	errs   []*ConfigError
}

// NewConfig returns a Config over values, for tests of a part's Configure.
func NewConfig(values map[string]any) *Config {
	if values == nil {
		values = map[string]any{}
	}
	return &Config{values: values, read: map[string]bool{}}
}

// PluginName is the name the pipeline gives the plugin.
func (c *Config) PluginName() string { return c.plugin }

// Has reports whether key is set.
func (c *Config) Has(key string) bool {
	_, ok := c.values[key]
	return ok
}

// Keys returns the keys set, sorted.
func (c *Config) Keys() []string {
	keys := make([]string, 0, len(c.values))
	for k := range c.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Errorf records a problem with key.
func (c *Config) Errorf(key, format string, args ...any) {
	c.errs = append(c.errs, &ConfigError{Key: key, Message: fmt.Sprintf(format, args...)})
}

// Errors returns the problems recorded so far.
func (c *Config) Errors() []*ConfigError { return c.errs }

func (c *Config) get(key string) (any, bool) {
	c.read[key] = true
	v, ok := c.values[key]
	return v, ok
}

func (c *Config) wrongType(key string, v any, want string) {
	c.Errorf(key, "= %s: must be %s", show(v), want)
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// String returns a string value, or def when the key is absent.
func (c *Config) String(key, def string) string {
	v, ok := c.get(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		c.wrongType(key, v, "a string")
		return def
	}
	return s
}

// Strings returns a list of strings, or def when the key is absent.
func (c *Config) Strings(key string, def []string) []string {
	v, ok := c.get(key)
	if !ok {
		return def
	}
	list, ok := v.([]any)
	if !ok {
		c.wrongType(key, v, "a list of strings")
		return def
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			c.wrongType(key, v, "a list of strings")
			return def
		}
		out = append(out, s)
	}
	return out
}

// Bool returns a boolean value, or def when the key is absent.
func (c *Config) Bool(key string, def bool) bool {
	v, ok := c.get(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		c.wrongType(key, v, "true or false")
		return def
	}
	return b
}

// Float returns a number, or def when the key is absent.
func (c *Config) Float(key string, def float64) float64 {
	v, ok := c.get(key)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case float64:
		return x
	case string:
		switch strings.ToLower(x) {
		case "inf", "+inf":
			return math.Inf(1)
		case "-inf":
			return math.Inf(-1)
		}
	}
	c.wrongType(key, v, "a number")
	return def
}

// Int returns an integer, or def when the key is absent.
func (c *Config) Int(key string, def int) int {
	v, ok := c.get(key)
	if !ok {
		return def
	}
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		c.wrongType(key, v, "an integer")
		return def
	}
	return int(f)
}

// Value returns the raw decoded value (JSON types: string, float64, bool, []any,
// map[string]any) and whether the key is set.
func (c *Config) Value(key string) (any, bool) { return c.get(key) }

// unread returns the keys no part read.
func (c *Config) unread() []string {
	var out []string
	for _, k := range c.Keys() {
		if !c.read[k] {
			out = append(out, k)
		}
	}
	return out
}

// Vocabulary is the model's vocabulary, delivered before the pipeline runs.
type Vocabulary struct {
	// Size is the number of logits per row (at least len(Tokens)).
	Size int
	// Tokens[id] is the text token id contributes to generated text (empty for control
	// tokens).
	Tokens [][]byte
	// BOS and EOS are the special ids, -1 when absent; EndOfGeneration lists every id that
	// ends a generation.
	BOS, EOS        TokenID
	EndOfGeneration []TokenID
}

// TokenBytes returns the text of token id (nil outside the vocabulary).
func (v *Vocabulary) TokenBytes(id TokenID) []byte {
	if id < 0 || int(id) >= len(v.Tokens) {
		return nil
	}
	return v.Tokens[id]
}

// VocabularyUser parts receive the vocabulary once the pipeline's model is known (after
// Configure, before the first step); an error fails the pipeline's build.
type VocabularyUser interface {
	UseVocabulary(v *Vocabulary) error
}
