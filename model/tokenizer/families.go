package tokenizer

// regexFamilies are the pre-tokenizers that run on the regex engine (regex.go): the values of
// tokenizer.ggml.pre that llama.cpp knows beyond the families with hand-written scanners
// (pretokenize.go), each with the expressions of its tokenizer.json as llama.cpp applies them,
// in order, every one splitting the pieces of the one before. (Case-insensitive contractions are
// spelt out, as llama.cpp does.) Families whose splitting is custom code in llama.cpp rather than
// expressions (kimi-k2, afmoe) and the BPE models on raw UTF-8 rather than GPT-2 bytes (gemma4,
// sarvam-moe, whitespace) are not here: a file naming them is refused with the list of
// supported names.
var regexFamilies = []struct {
	names        []string
	regexes      []string
	ignoreMerges bool // a word that is a vocabulary entry is taken whole (llama.cpp's ignore_merges)
	addBOS       bool // BOS is added unless the file says otherwise
}{
	{names: []string{"jais-2"}, regexes: []string{
		contractions + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`,
	}},
	{names: []string{"deepseek-llm"}, regexes: []string{
		`[\r\n]`,
		`\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-` + "\u1f7d" + `ᾀ-ᾴᾶ-ᾼ` + "\u1fbe" + `ῂ-ῄῆ-ῌῐ-` + "\u1fd3" + `ῖ-` + "\u1fdb" + `ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ` + "\u2126" + `ℨ` + "\u212a" + `-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`,
		`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
		`\s+$`,
		`[一-龥ࠀ-一가-퟿]+`,
		`\p{N}+`,
	}},
	{names: []string{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, regexes: []string{
		`\p{N}{1,3}`,
		`[一-龥぀-ゟ゠-ヿ]+`,
		asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"spark2_5"}, regexes: []string{
		`\p{N}{1,3}`,
		`[一-龥぀-ゟ゠-ヿ]+`,
		asciiPunct + `[A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+`,
		`\p{N}`,
	}},
	{names: []string{"youtu"}, ignoreMerges: true, regexes: []string{
		`[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+`,
		casedWords + `|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"deepseek-coder"}, regexes: []string{
		`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`,
	}},
	{names: []string{"falcon"}, regexes: []string{
		`[\p{P}\$\+<=>\^~\|` + "`" + `]+`,
		gpt2Regex,
		`[0-9][0-9][0-9]`,
	}},
	{names: []string{"qwen35"}, regexes: []string{
		contractions + `|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"poro-chat", "bloom", "gpt3-finnish"}, regexes: []string{
		` ?[^(\s|.,!?…。，、।۔،)]+`,
	}},
	{names: []string{"viking"}, regexes: []string{
		` ?[^(\s|.,!?…。，、।۔،)]+`,
		`\p{N}`,
	}},
	{names: []string{"tekken"}, ignoreMerges: true, addBOS: true, regexes: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"chameleon"}, addBOS: true, regexes: []string{
		`<sentinel:[0-9]+>`,
		`(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`,
		`([\t\n]|    |  )`,
		`\p{N}`,
		`[\p{P}!-/:-@\[-` + "`" + `{-~]`,
		gpt2Regex,
	}},
	{names: []string{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, regexes: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+` + contractions + `?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*` + contractions + `?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"granite-embed-multi-97m"}, ignoreMerges: true, regexes: []string{
		`[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+` + contractions + `?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*` + contractions + `?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"tiny_aya", "cohere2moe"}, regexes: []string{
		`\d{1,3}(?=(?:\d{3})*\b)`,
		casedWords + `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"superbpe"}, regexes: []string{
		`\p{N}+`,
		`(?=(\d{3})+(?!\d))`,
	}},
	{names: []string{"bailingmoe", "bailingmoe2", "llada-moe"}, regexes: []string{
		`'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`,
	}},
	{names: []string{"seed-coder"}, regexes: []string{
		contractions + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"ufakzeka"}, regexes: []string{
		`[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"laguna"}, regexes: []string{
		`[^\n]+|[\n]+`,
		contractions + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
	{names: []string{"exaone-moe"}, regexes: []string{
		contractions + `|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`,
	}},
	{names: []string{"minicpm5"}, ignoreMerges: true, regexes: []string{
		`\p{N}{1,3}`,
		contractions + `|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}},
}

// Pieces shared by several families' expressions.
const (
	contractions = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
	gpt2Regex    = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	asciiPunct   = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~]`
	casedWords   = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` + contractions + `?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` + contractions + `?`
)
