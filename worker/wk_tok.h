/* wk_tok.h - remat-train --encode and --decode: a Hugging Face tokenizer (eng_tok.h) on
 * files and on standard input.
 */
#ifndef WK_TOK_H
#define WK_TOK_H

/* Whether argv names one of these subcommands (argv[1] is --encode or --decode). */
int wk_tok_wanted(int argc, char **argv);

/* Runs it: --encode TOKENIZER FILE... prints each file's ids as one JSON array a line;
 * --decode TOKENIZER reads one JSON array of ids a line from standard input and prints each
 * one's text as a JSON string a line (so that newlines in it survive). Returns the exit
 * status: 0 done, 1 bad input (a message on stderr), 2 bad usage. */
int wk_tok_main(int argc, char **argv);

#endif
