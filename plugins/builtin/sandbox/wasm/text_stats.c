/* text_stats: the example WebAssembly tool of clawkit-sandbox (WASI preview 1).
 *
 * Reads one JSON object on stdin and writes one JSON object on stdout:
 *   {"text": "..."}          statistics of the given text
 *   {"path": "notes.txt"}    ... of a file; only directories the host preopened exist
 *   {"host_file": "a.txt"}   ... of a file read by the HOST tool read_file, called through
 *                            the import clawkit.call_tool (gated and audited by the host)
 * Result: {"source": ..., "bytes": n, "lines": n, "words": n, "longest_word": "...",
 *          "calls": n, "total_words": n}   (calls and words so far in this instance)
 * or {"error": "..."}.
 *
 * Two builds of this file (build.sh, reproducible: zig cc --target=wasm32-wasi -O2):
 *   text_stats.wasm       a WASI *command*: main() reads stdin, writes stdout; the host
 *                         makes a fresh instance per call, so calls is always 1
 *   text_stats_task.wasm  a WASI *reactor* (-mexec-model=reactor -DCLAWKIT_REACTOR): the
 *                         host keeps one instance per task (an agent run) and calls the
 *                         export clawkit_handle once per tool call; the static counters
 *                         below persist between the calls of the task
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

__attribute__((import_module("clawkit"), import_name("call_tool")))
int clawkit_call_tool(const char *name, int name_len, const char *args, int args_len, char *out, int out_cap);

#define MAX_INPUT (1 << 20)
#define MAX_TEXT (4 << 20)

#define MAX_OUTPUT (64 << 10)

static char input[MAX_INPUT + 1];
static char text_buf[MAX_TEXT + 1];
static char output[MAX_OUTPUT];
static int out_len;
static int task_calls, task_words;  /* state of the instance: survives between calls of one task */

static void emit(const char *s, int n) {
    if (n > MAX_OUTPUT - out_len) n = MAX_OUTPUT - out_len;
    memcpy(output + out_len, s, n);
    out_len += n;
}

static void emits(const char *s) { emit(s, (int)strlen(s)); }

static void emitf(const char *fmt, int a, int b, int c) {
    char tmp[128];
    int n = snprintf(tmp, sizeof tmp, fmt, a, b, c);
    emit(tmp, n < (int)sizeof tmp ? n : (int)sizeof tmp - 1);
}

/* The string value of "key" in a flat JSON object (escapes decoded, \u as '?'). */
static int json_string(const char *json, const char *key, char *out, int cap) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *p = strstr(json, pattern);
    if (!p) return -1;
    p += strlen(pattern);
    while (*p && isspace((unsigned char)*p)) p++;
    if (*p++ != ':') return -1;
    while (*p && isspace((unsigned char)*p)) p++;
    if (*p++ != '"') return -1;
    int n = 0;
    while (*p && *p != '"' && n < cap - 1) {
        char c = *p++;
        if (c == '\\' && *p) {
            char e = *p++;
            switch (e) {
                case 'n': c = '\n'; break;
                case 't': c = '\t'; break;
                case 'r': c = '\r'; break;
                case 'b': c = '\b'; break;
                case 'f': c = '\f'; break;
                case 'u': c = '?'; for (int i = 0; i < 4 && *p; i++) p++; break;
                default: c = e;
            }
        }
        out[n++] = c;
    }
    out[n] = 0;
    return n;
}

static void json_escaped(const char *s) {
    emits("\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; emit(esc, 2); }
        else if (c == '\n') emits("\\n");
        else if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); emits(esc); }
        else emit((const char *)&c, 1);
    }
    emits("\"");
}

static int fail(const char *what, const char *detail) {
    emits("{\"error\": ");
    char msg[512];
    snprintf(msg, sizeof msg, "%s%s", what, detail ? detail : "");
    json_escaped(msg);
    emits("}\n");
    return 0;
}

static void stats(const char *source, const char *text, int len) {
    int lines = 0, words = 0, in_word = 0, start = 0, best_start = 0, best_len = 0;
    for (int i = 0; i <= len; i++) {
        char c = i < len ? text[i] : ' ';
        if (c == '\n') lines++;
        if (isspace((unsigned char)c)) {
            if (in_word && i - start > best_len) { best_len = i - start; best_start = start; }
            in_word = 0;
        } else if (!in_word) {
            in_word = 1; words++; start = i;
        }
    }
    if (len > 0 && text[len - 1] != '\n') lines++;
    char longest[128];
    if (best_len > 127) best_len = 127;
    memcpy(longest, text + best_start, best_len);
    longest[best_len] = 0;
    task_calls++;
    task_words += words;
    emits("{\"source\": ");
    json_escaped(source);
    emitf(", \"bytes\": %d, \"lines\": %d, \"words\": %d, \"longest_word\": ", len, lines, words);
    json_escaped(longest);
    emitf(", \"calls\": %d, \"total_words\": %d}\n", task_calls, task_words, 0);
}

/* One request (the JSON arguments in input[]) -> one response in output[0..out_len). */
static int handle(void) {
    out_len = 0;
    static char value[4096];
    if (json_string(input, "path", value, sizeof value) >= 0) {
        FILE *f = fopen(value, "rb");
        if (!f) return fail("cannot open (not in a granted directory?): ", value);
        int len = (int)fread(text_buf, 1, MAX_TEXT, f);
        fclose(f);
        text_buf[len] = 0;
        stats(value, text_buf, len);
        return 0;
    }
    if (json_string(input, "host_file", value, sizeof value) >= 0) {
        static char args[8192];
        int alen = snprintf(args, sizeof args, "{\"path\": \"%s\"}", value);
        int got = clawkit_call_tool("read_file", 9, args, alen, text_buf, MAX_TEXT);
        if (got < 0) return fail("host call failed: ", "read_file");
        text_buf[got < MAX_TEXT ? got : MAX_TEXT] = 0;
        if (strncmp(text_buf, "Error:", 6) == 0) return fail("host read_file: ", text_buf);
        stats(value, text_buf, got);
        return 0;
    }
    int len = json_string(input, "text", text_buf, MAX_TEXT);
    if (len < 0) return fail("give one of: text, path, host_file", NULL);
    stats("text", text_buf, len);
    return 0;
}

#ifdef CLAWKIT_REACTOR
/* The per-task ABI: the host asks for a buffer, writes the request (JSON arguments) into it,
 * then calls clawkit_handle; the result is (response pointer << 32) | response length. */
__attribute__((export_name("clawkit_alloc")))
char *clawkit_alloc(int size) { return size >= 0 && size <= MAX_INPUT ? input : 0; }

__attribute__((export_name("clawkit_handle")))
unsigned long long clawkit_handle(char *request, int len) {
    if (len < 0 || len > MAX_INPUT) len = 0;
    if (request != input) memmove(input, request, len);
    input[len] = 0;
    handle();
    return ((unsigned long long)(unsigned)(size_t)output << 32) | (unsigned)out_len;
}
#else
int main(void) {
    size_t n = fread(input, 1, MAX_INPUT, stdin);
    input[n] = 0;
    handle();
    fwrite(output, 1, out_len, stdout);
    return 0;
}
#endif
