package tokenizer

import "fmt"

// RegexFamily is a pre-tokenizer run by the regex engine, for the external tests.
type RegexFamily struct {
	Names   []string
	Regexes []string
}

// RegexFamilies lists the regex-engine pre-tokenizers.
func RegexFamilies() []RegexFamily {
	var fs []RegexFamily
	for _, f := range regexFamilies {
		fs = append(fs, RegexFamily{Names: f.names, Regexes: f.regexes})
	}
	return fs
}

// SplitWords returns the words the named pre-tokenizer splits text into.
func SplitWords(pre, text string) ([]string, error) {
	p, ok := pretokenizers[pre]
	if !ok {
		return nil, fmt.Errorf("no pre-tokenizer %q", pre)
	}
	words := []string{}
	p.split(text, func(w string) { words = append(words, w) })
	return words, nil
}

// SplitRegexes splits text with the given expressions in turn, on the regex engine.
func SplitRegexes(exprs []string, text string) ([]string, error) {
	p := &pretokenizer{}
	for _, e := range exprs {
		re, err := compileRegex(e)
		if err != nil {
			return nil, err
		}
		p.stages = append(p.stages, stage{re: re})
	}
	words := []string{}
	p.split(text, func(w string) { words = append(words, w) })
	return words, nil
}
