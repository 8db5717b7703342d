// Writes Llama 3's vocabulary (128 256 tokens, ids 128000 and up special) and its 280 147
// merges in rank order, as llama3-tokenizer-js holds them, as JSON on standard output.
import tok from 'llama3-tokenizer-js';

process.stdout.write(JSON.stringify({ tokens: tok.vocabById, merges: [...tok.merges.keys()] }));
