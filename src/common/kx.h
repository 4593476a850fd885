/* src/common/kx.h — the common module: small helpers that libkbox, the
 * runtime, kbox(1), kbox-supervisor and kbox-http all borrow (as curl's
 * lib/curlx/).  Each idea exists here once: the clock, durations and byte
 * sizes as text, UTF-8, a growing string, a growing argv, atomic file
 * writes, directories, a child's side of fork, base64, timestamps.
 *
 * The rules of the room: C and libc only (this header includes nothing
 * else, and neither do src/common/kx_*.c: no ZeroMQ, no jansson, no
 * libsodium, no kbox header); every name starts with kx_ (KX_ for macros);
 * failure is 0 / -1 with errno, or NULL with errno, never kbox_error_t —
 * callers wrap errno into their own error type.  tests/unit_common.c links
 * this module and nothing else. */
#ifndef KX_H
#define KX_H

#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#if defined(__GNUC__)
#define KX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define KX_SENTINEL __attribute__((sentinel))
#else
#define KX_PRINTF(a, b)
#define KX_SENTINEL
#endif

/* ---- kx_time.c: clocks and timestamps ---- */

/* The monotonic clock in milliseconds (for deadlines and durations). */
long long kx_now_ms(void);

/* The wall clock in seconds since the epoch, to the microsecond (for
 * timestamps only: it jumps when the clock is set). */
double kx_wall_s(void);

/* Write the time T (seconds since the epoch) to OUT as ISO-8601 UTC with
 * DIGITS (0-6, clamped) fractional digits, rounded to the nearest unit of
 * the last: "2026-11-29T09:21:39Z" (0), "…39.123Z" (3), "…39.123456Z" (6,
 * as Jupyter headers carry). */
void kx_iso8601(double t, int digits, char out[32]);

/* ---- kx_fmt.c: numbers as people read them ---- */

/* MS milliseconds as a duration in a message, into BUF (SIZE bytes):
 * whole seconds as "2 s", more than a second as "1.5 s", else "200 ms".
 * Returns BUF. */
const char *kx_fmt_ms(char *buf, size_t size, long long ms);

/* N bytes as a size in a message, into BUF (SIZE bytes; 16 is enough):
 * "100 bytes" ("1 byte") below 1 KiB; from there in the largest binary unit (KiB,
 * MiB, GiB, TiB) that is at most N, as a whole number when it is exact
 * ("2 GiB", "512 MiB", "16 KiB") and else with one decimal ("1.5 GiB",
 * never "1024.0 MiB": a value that rounds up to the next unit is said in
 * it); "-" when N is negative (not known).  The one spelling of a size in
 * the whole product.  Returns BUF. */
const char *kx_fmt_bytes(char *buf, size_t size, long long n);

/* A message a person reads, printf-style, into BUF (SIZE bytes): when it
 * does not fit, it is cut at a character boundary (kx_utf8_floor, so the
 * text stays UTF-8) and ends in "..." so that the cut shows; never a
 * silent truncation.  Nothing is written when SIZE is 0.  True when the
 * whole message fit. */
bool kx_msgf(char *buf, size_t size, const char *fmt, ...) KX_PRINTF(3, 4);

/* S, a path say, as a message shows it: whole when it is at most MAX
 * bytes, else its beginning and its end around "…" (MAX bytes in all, each
 * cut at a character boundary), so that what follows it in the message
 * (why it failed) is not cut instead; into BUF (SIZE bytes; MAX is at most
 * SIZE - 1).  Returns BUF. */
const char *kx_fmt_middle(char *buf, size_t size, const char *s, size_t max);

/* kx_msgf with a va_list (AP is used up), for a function that fills an
 * error struct of its own. */
bool kx_vmsgf(char *buf, size_t size, const char *fmt, va_list ap) KX_PRINTF(3, 0);

/* What a model reads of a result whose text is TEXT (may be NULL): TEXT,
 * but never an empty block, which a client may drop: "[no output]" when
 * it is empty, with "(only blank space was printed)" when it holds only
 * spaces, tabs and line breaks. */
const char *kx_model_text(const char *text);

/* ---- kx_utf8.c: UTF-8 (Unicode §3.9) ---- */

/* True when S[0..LEN) is well-formed UTF-8: no stray continuation byte,
 * no overlong form, no surrogate, nothing beyond U+10FFFF, no sequence
 * cut short.  NUL bytes are characters like any other (a C string:
 * kx_utf8_valid(s, strlen(s))). */
bool kx_utf8_valid(const char *s, size_t len);

/* True when the C string S is well-formed UTF-8 (what the session
 * protocol carries); false for NULL. */
bool kx_utf8_valid_str(const char *s);

/* A new NUL-terminated copy of S[0..LEN) that is well-formed UTF-8: each
 * maximal ill-formed subpart (Unicode §3.9, "substitution of maximal
 * subparts", which Python's decode(errors="replace") and so jupyter_client
 * follow) becomes U+FFFD (EF BF BD).  A subpart is a byte that starts no
 * character (80-C1, F5-FF), or a lead byte with the continuation bytes that
 * could still have completed it: "\xe2\x82A" gives one U+FFFD and "A",
 * "\xc0\xaf" (overlong) two, "\xed\xa0\x80" (a surrogate) three.  Valid
 * sequences, NUL bytes included, are copied as they are.  *OUT_LEN (may be
 * NULL) gets the length without the NUL.  Caller frees; NULL on ENOMEM. */
char *kx_utf8_repair(const char *s, size_t len, size_t *out_len);

/* Where to cut S[0..LEN) to keep at most MAX bytes without cutting a
 * character in two: the largest N <= MAX (and <= LEN) such that S[0..N)
 * ends neither inside a character (or inside a maximal ill-formed subpart,
 * which kx_utf8_repair would make one U+FFFD) nor in the first bytes of a
 * character that the end of S cut short.  Looks back at most 3 bytes. */
size_t kx_utf8_floor(const char *s, size_t len, size_t max);

/* The number of code points in S[0..LEN): what it has after
 * kx_utf8_repair (each maximal ill-formed subpart counts one). */
size_t kx_utf8_count(const char *s, size_t len);

/* The unit (Unicode §3.9) at S, of the N > 0 bytes left: its length in
 * bytes, and in *IS_CHAR whether it is a well-formed character (else a
 * maximal ill-formed subpart, which kx_utf8_repair makes one U+FFFD). */
size_t kx_utf8_unit(const char *s, size_t n, bool *is_char);

/* The invisible format character that S (N bytes) starts with, as its
 * code point, or 0: a character that shows nothing, or changes or hides
 * what text around it looks like: the soft hyphen, U+034F, U+061C, the
 * Hangul fillers, U+17B4, U+17B5, U+180B..U+180F, U+200B..U+200F
 * (zero-width space, non-joiner and joiner, LRM, RLM), U+2028..U+202E
 * (line and paragraph separators, bidi embeddings and overrides),
 * U+2060..U+206F (word joiner, invisible operators, bidi isolates),
 * variation selectors, U+FEFF, U+FFF9..U+FFFB, U+1BCA0..U+1BCA3,
 * U+1D173..U+1D17A and the tags U+E0000..U+E0FFF; and every other
 * format character, Unicode's general category Cf (U+13430..U+13438, the
 * Egyptian format controls, say); and every code point Unicode 14 did
 * not assign (Cn), later ones among them, which a terminal whose C library
 * knows no later version (glibc 2.36's) draws with no width. */
unsigned kx_utf8_invisible(const char *s, size_t n);

/* The code point of the well-formed character of 2 to 4 bytes that S (N
 * bytes) starts with, its length in *LEN; 0 for anything else (ASCII, a
 * byte that starts no character, one cut short). */
unsigned kx_utf8_multibyte(const char *s, size_t n, size_t *len);

/* The length in bytes of the combining mark at S (N bytes at most), or 0:
 * a character of Unicode's general category Mn or Me (U+0300, U+05B0,
 * U+0483, U+20E3...), or a Hangul vowel or final consonant (U+1160..U+11FF,
 * U+D7B0..U+D7FF), which a reader sees on the character before it, not as
 * one of its own. */
size_t kx_utf8_mark_len(const char *s, size_t n);

/* The length in bytes of the blank character at S (N bytes at most), or
 * 0: one that shows as empty space: a space, a tab, U+00A0 (no-break
 * space), U+1680, U+2000..U+200A (the typographic spaces), U+202F,
 * U+205F, U+2800 (the blank braille pattern) and U+3000 (the ideographic
 * space). */
size_t kx_utf8_blank(const char *s, size_t n);

/* The one way kbox shows a name that it did not choose (a file name
 * from the workspace, a path in a message): NAME[0..LEN) into OUT (SIZE
 * bytes; KX_NAME_ESCAPED_MAX(LEN) holds any name whole), so that no name
 * can pose as another entry or line, or hide what it is.  A backslash is
 * \\; a newline, tab, carriage return \n, \t, \r; any other control
 * character (C0, DEL, C1) and every byte that is not UTF-8 \xNN (byte by
 * byte); an invisible format character (kx_utf8_invisible) \uNNNN,
 * the joiners too (text keeps them for emoji and scripts: cli_write_safe;
 * in a name they would make two names look alike).  Other characters (é,
 * 中文, emoji) are themselves.  Stops before an
 * escape that would not fit, never in one.  Returns the length written,
 * OUT NUL-terminated (SIZE > 0). */
#define KX_NAME_ESCAPED_MAX(len) (4 * (size_t)(len) + 1)
size_t kx_name_escape(const char *name, size_t len, char *out, size_t size);

/* ---- kx_buf.c: a growing string ---- */

/* A growing string, like redis's sds but a struct the caller owns:
 * zero-initialise it (KX_BUF_INIT), append, then take the text.  The
 * capacity doubles up to KX_BUF_PREALLOC and then grows by that much at
 * a time.  When an append fails (out of memory, or SIZE_MAX reached) the
 * buffer is failed: that append and every later one return -1 and change
 * nothing, and take returns NULL.  DATA is NUL-terminated once anything
 * was appended. */
typedef struct {
	char *data;
	size_t len, cap;
	bool failed;
} kx_buf_t;
#define KX_BUF_INIT               \
	{                         \
		NULL, 0, 0, false \
	}
#define KX_BUF_PREALLOC ((size_t)1 << 20)

/* Append LEN bytes at DATA (NUL bytes too).  0, or -1 (B is failed). */
int kx_buf_append(kx_buf_t *b, const void *data, size_t len);

/* Append the C string S.  0, or -1 (B is failed). */
int kx_buf_appends(kx_buf_t *b, const char *s);

/* Append printf-style text.  0, or -1 (B is failed). */
int kx_buf_appendf(kx_buf_t *b, const char *fmt, ...) KX_PRINTF(2, 3);

/* The text (new: the caller frees it; "" when nothing was appended) and its
 * length in *LEN (may be NULL); B is left empty, ready for reuse.  NULL
 * when B failed or memory ran out (B is emptied all the same). */
char *kx_buf_take(kx_buf_t *b, size_t *len);

/* Free B's text and make it empty again (not failed). */
void kx_buf_reset(kx_buf_t *b);

/* The array V (N elements of SIZE bytes, room for *CAP) with room for
 * one more: V itself when there is, else V reallocated to twice *CAP (4
 * at first), *CAP updated.  NULL when out of memory: V and *CAP are then
 * as they were, and V still the caller's. */
void *kx_grow(void *v, size_t *cap, size_t n, size_t size);

/* ---- kx_quote.c: kernel text in a text a model reads ---- */

/* Append the LEN bytes at S as the text a model reads shows them: a NUL
 * byte as the two characters "\0", everything else as it is (so the text
 * holds no NUL, and nothing after one is lost). */
void kx_buf_visible(kx_buf_t *b, const char *s, size_t len);

/* Append the LEN bytes at S, text the kernel made (its output, a value, a
 * file of its outputs read back), as kx_buf_visible does, with one more
 * backslash before each line of it that begins where a line of B begins
 * and looks like one of kbox's own lines ("[stderr]", "[note: ", "Out[",
 * …; after any backslashes, blank characters or characters that show
 * nothing, its "[" perhaps a fullwidth one), as mboxrd quotes "From ". */
void kx_buf_kernel(kx_buf_t *b, const char *s, size_t len);

/* Kernel text written to a terminal as it comes (kbox exec's streams),
 * quoted as kx_buf_kernel quotes it.  There a carriage return lets what
 * comes after draw over a line's start, and standard output and standard
 * error share one screen.  So each piece that begins a line or follows a
 * carriage return (a segment) is held until it can be told, then written
 * after one more backslash when it reads as one of kbox's own lines, or
 * when it may yet (a beginning of one: "[not", "kbox", blanks only) and
 * what shows beside it may make it one: the rest of an earlier line that
 * it may not cover (counted in the most columns each character can take),
 * or the other stream's text right after it; else as it is.  The rest
 * of a segment goes as it comes.  A segment's beginning is held at most
 * 512 bytes, and until the other stream or kx_live_end says it ends.
 * WRITE gets the text in order, by STREAM, for cli_write_safe: a
 * backspace must not reach the terminal (the screen would not be as
 * judged).  The first text begins a line. */
typedef void kx_live_write_fn(void *arg, int stream, const char *s, size_t len);
typedef struct {
	kx_buf_t held;   /* a segment's beginning, not told yet */
	int held_stream; /* its stream */
	bool mid;        /* the screen is within a segment already told */
	size_t col_max;  /* the cursor's column, at most */
	size_t line_max; /* the columns its line shows, at most */
	kx_live_write_fn *write;
	void *arg;
} kx_live_t;
void kx_live_init(kx_live_t *q, kx_live_write_fn *write, void *arg);
/* LEN bytes of STREAM's text, S */
void kx_live_text(kx_live_t *q, int stream, const char *s, size_t len);
/* The end: what is held is told, and Q's memory freed.  Whether the last
 * line is still open (not ended by a newline): kbox's own lines that
 * follow must begin one of their own. */
bool kx_live_end(kx_live_t *q);

/* S as one word a POSIX shell reads back as S, into OUT (SIZE bytes,
 * 4 * strlen(S) + 3 holds any S whole), for a path in a command kbox
 * advises (newcomer 12, F4: a path with a space, pasted, made the wrong
 * directories): as it is when it holds only letters, digits, bytes of
 * UTF-8 beyond ASCII and _./,:@%+=-, else in single quotes, a quote
 * as '\''.  Returns OUT. */
#define KX_SHELL_WORD_MAX(len) (4 * (size_t)(len) + 3)
const char *kx_shell_word(const char *s, char *out, size_t size);

/* ---- kx_argv.c: a growing argv ---- */

/* A growing NULL-terminated array of new strings (a command line), owned
 * by the caller: zero-initialise it (KX_ARGV_INIT), add, then take V.
 * When an add fails (out of memory) the argv is failed: every later add
 * returns -1 and changes nothing, and take returns NULL.  V[N] is NULL
 * once anything was added. */
typedef struct {
	char **v;
	size_t n, cap;
	bool failed;
} kx_argv_t;
#define KX_ARGV_INIT              \
	{                         \
		NULL, 0, 0, false \
	}

/* Append copies of S and of each further string up to the NULL that ends
 * the list: kx_argv_add(&a, "--bind", src, dest, NULL).  0, or -1 (A is
 * failed). */
int kx_argv_add(kx_argv_t *a, const char *s, ...) KX_SENTINEL;

/* Append one printf-style argument (of any length).  0, or -1 (A is
 * failed). */
int kx_argv_addf(kx_argv_t *a, const char *fmt, ...) KX_PRINTF(2, 3);

/* The array (new: free each string, then the array; an empty one when
 * nothing was added), A left empty for reuse; NULL when A failed or memory
 * ran out (A is emptied all the same). */
char **kx_argv_take(kx_argv_t *a);

/* Free A's strings and array and make it empty again (not failed). */
void kx_argv_reset(kx_argv_t *a);

/* ---- kx_file.c: writing files ---- */

/* Close *FD when it is open (>= 0) and set it to -1; errno is kept, so
 * that a clean-up does not hide why it was needed. */
void kx_close(int *fd);

/* kx_close on each of the N descriptors at FDS (a pipe's two, say). */
void kx_close_all(int *fds, size_t n);

/* The first line of the stream F (a file, a command's output) into BUF,
 * SIZE bytes, without its newline; "" when F is NULL or has none.  F is
 * left open. */
void kx_first_line(FILE *f, char *buf, size_t size);

/* Write all LEN bytes at DATA to FD, retrying after EINTR and short writes.
 * 0, or -1 with errno. */
int kx_write_all(int fd, const void *data, size_t len);

/* Read up to LEN bytes of FD at OFFSET into BUF, retrying after EINTR and
 * short reads: fewer only at the end of the file.  The bytes read, or -1
 * with errno. */
ssize_t kx_pread_full(int fd, void *buf, size_t len, off_t offset);

/* Make a new empty file in the directory DIRFD (or AT_FDCWD), to be
 * renamed over a name there once written: named PREFIX followed by 64
 * random bits in hex (put in NAME, SIZE bytes), which no other process can
 * guess, made with O_EXCL|O_NOFOLLOW, so that nothing planted at that name
 * (a link, a FIFO) is opened, followed or waited on; another name if that
 * one is taken.  Mode MODE (less the umask).  The descriptor (write-only,
 * close-on-exec), or -1 with errno. */
int kx_temp_open(int dirfd, const char *prefix, mode_t mode, char *name, size_t size);

/* Open PATH (relative to the directory DIRFD, or AT_FDCWD; absolute, from
 * "/") with FLAGS (and MODE, for O_CREAT) one part at a time, following
 * no symbolic link in any part: ELOOP or ENOTDIR where one is.  What
 * openat2(RESOLVE_NO_SYMLINKS) does on a kernel without it.  The
 * descriptor (close-on-exec), or -1 with errno. */
int kx_open_walk(int dirfd, const char *path, int flags, mode_t mode);

/* openat2(2) of PATH from DIRFD with FLAGS (and MODE, for O_CREAT),
 * close-on-exec, resolved as RESOLVE (RESOLVE_* of <linux/openat2.h>);
 * on a kernel without openat2, kx_open_walk, which follows no link at all
 * (stricter than any RESOLVE asks, never looser).  The descriptor, or -1
 * with errno. */
int kx_openat2(int dirfd, const char *path, int flags, mode_t mode, unsigned long long resolve);

/* Open PATH from DIRFD with FLAGS (and MODE) through no symbolic link in
 * any part (openat2 RESOLVE_NO_SYMLINKS, else kx_open_walk): a path whose
 * links were resolved when it was made has none, so one met now was put
 * in since.  The descriptor (close-on-exec), or -1 with errno (ELOOP at
 * a link). */
int kx_open_no_links(int dirfd, const char *path, int flags, mode_t mode);

/* From now on, every path at or below the directory DIR (absolute, its
 * links resolved: kbox's state directory) that kx_open_path, kx_open_file
 * and kx_write_atomic open is reached through no symbolic link
 * (kx_open_no_links): a link swapped in there since DIR was resolved, in
 * place of it or of a directory in it, by code that can write a directory
 * above, is refused, not followed into another directory.  NULL ends it.
 * 0, or -1 when out of memory. */
int kx_no_links_below(const char *dir);

/* openat(2) of PATH from DIRFD with FLAGS (and MODE), close-on-exec;
 * through no link when PATH is at or below the kx_no_links_below
 * directory.  The descriptor, or -1 with errno. */
int kx_open_path(int dirfd, const char *path, int flags, mode_t mode);

/* opendir(3) of PATH, through kx_open_path.  NULL with errno. */
DIR *kx_opendir(const char *path);

/* Open NAME in the directory DIRFD (or AT_FDCWD) with FLAGS (and MODE, for
 * O_CREAT), never following a link at it and never waiting: a FIFO, a
 * socket or a device there (put in place of a file kbox keeps, by code
 * that could reach the directory) is refused (errno ENXIO, as for a FIFO
 * without a reader), not opened for a wait on its other end.  The
 * descriptor (close-on-exec; O_NONBLOCK, which a regular file's reads and
 * writes do not heed), or -1 with errno. */
int kx_open_file(int dirfd, const char *name, int flags, mode_t mode);
/* kx_open_file, and what fstat(2) says of the file into *ST. */
int kx_open_file_st(int dirfd, const char *name, int flags, mode_t mode, struct stat *st);

/* kx_write_atomic's FLAGS: the data must survive a crash of the machine
 * (fsync the file before the rename and the directory after). */
#define KX_DURABLE 1u

/* Replace the file NAME in the directory DIRFD (or AT_FDCWD; NAME may have
 * directories, then the last one is the directory) by LEN bytes at DATA
 * with mode MODE, all at once: written to a kx_temp_open file in the same
 * directory, then renamed over NAME, so that a reader sees the old content
 * or the new, never part of it.  The file gets MODE exactly (the umask does
 * not apply).  Whatever is at NAME (a symbolic link, a
 * FIFO) is replaced, never followed or opened; when anything fails, NAME
 * is left as it was and no temporary file remains.  FLAGS: 0, or
 * KX_DURABLE.  0, or -1 with errno. */
int kx_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
                    unsigned flags);

/* ---- kx_dir.c: directories ---- */

/* Is DIR private: a directory owned by the effective uid, rwx for it and
 * closed to group and other but for the group's search bit (0710)?  0
 * when it is; 1 when it is not, with WHY (SIZE bytes) saying how, and
 * the chmod that fixes it ("directory D is accessible to others (mode
 * 0755, need 0700): chmod 700 D"; under root "need 0700 or 0710"); -1 with
 * errno when it cannot be looked at (WHY untouched). */
int kx_private_dir(const char *dir, char *why, size_t size);

/* Remove everything inside DIR (which stays), to any depth (one
 * descriptor open at a time, no path longer than a name), never following
 * a symbolic link.  0 (also when DIR does not exist), or -1 with errno. */
int kx_empty_dir(const char *dir);
/* The same of the directory open at FD (which stays open). */
int kx_empty_dirfd(int fd);

/* Call VISIT(DIRFD, NAME, ST, ARG) for every entry of the directory FD
 * and, MAX_DEPTH levels down, of its directories (after the directory
 * itself is visited), never through a symbolic link; what cannot be read
 * is passed over.  True when it visited directories MAX_DEPTH levels
 * down without entering them: they may hold more. */
struct stat;
bool kx_walk(int fd, unsigned max_depth,
             void (*visit)(int dirfd, const char *name, const struct stat *st, void *arg),
             void *arg);

/* PATH's nearest directory that exists (PATH itself, or the longest of
 * its prefixes cut at a '/') into NEAR, and that resolved (realpath) into
 * REAL, both PATH_MAX bytes; "/" in REAL when none resolves. */
void kx_realpath_nearest(const char *path, char *near, char *real);

/* A path to bind or connect the unix socket NAME in directory DIR by, into
 * BUF (SIZE at most sizeof sun_path, 108): "DIR/NAME" when that fits, else
 * "/proc/self/fd/N/NAME", N a descriptor of DIR: *DIRFD_P when it is one
 * already (>= 0), else DIR opened here (O_PATH, close-on-exec) and left in
 * *DIRFD_P for the caller to close once the socket is bound or connected
 * (libzmq, which connects again by the path, needs it as long as the
 * socket lives).  Any DIR works, however long.  0, or -1 with errno: from
 * opening DIR (*DIRFD_P stays < 0), or ENAMETOOLONG when NAME itself is
 * too long (*DIRFD_P is open). */
int kx_unix_path(char *buf, size_t size, const char *dir, const char *name, int *dirfd_p);

/* ---- kx_proc.c: starting a child process ---- */

/* Make sure descriptors 0, 1 and 2 are open, first thing in main (as git
 * and OpenSSH do): else the program's first socket or file takes the place
 * of one, and what is meant for standard output goes into it.  One that is
 * closed is opened on /dev/null in the direction it is not used in (0
 * write-only, 1 and 2 read-only), so that using it still fails with EBADF,
 * as on a closed descriptor, and the program reports that.  Which were
 * closed (bit FD set for each), or -1 with errno when /dev/null cannot be
 * opened. */
int kx_std_fds_open(void);

/* The PATH a kernel gets, and where commands are looked up. */
#define KX_SAFE_PATH "/usr/local/bin:/usr/bin:/bin"

/* CMD as an absolute path: itself when it has a '/', else the first of
 * KX_SAFE_PATH's directories that has it, looked for under ROOT (NULL: the
 * host's /, where it must be executable; in another root, that it exists).
 * A new string, or NULL. */
char *kx_resolve_command(const char *cmd, const char *root);

/* A host identity a child takes before it execs. */
typedef struct {
	uid_t uid;
	gid_t gid;
} kx_ids_t;

/* Take IDS (neither may be 0) in a child: no supplementary groups, then
 * the gid, then the uid, which from root clears every capability (only
 * system calls: async-signal-safe); then check that real, effective and
 * saved ids all took and that the way back to root is closed.  0, or -1
 * with errno. */
int kx_take_ids(const kx_ids_t *ids);

/* What a child does between fork and exec (kx_child_exec). */
typedef struct {
	const char *cwd;     /* its working directory (NULL: the parent's) */
	int errfd;           /* errno goes here when a step fails (close-on-exec) */
	int out_fd;          /* its stdout, and stderr but with ERR_FD (< 0: /dev/null) */
	int err_fd;          /* > 0: its stderr, apart (0: as stdout) */
	int in_fd;           /* its stdin (<= 0: /dev/null) */
	const kx_ids_t *ids; /* the identity it takes (NULL: the parent's) */
	pid_t parent;        /* the parent, to die with */
	const int *keep;     /* descriptors from 3 up that cross exec */
	size_t n_keep;
	int pdeath_sig; /* its parent-death signal (0: SIGKILL) */
} kx_child_t;

/* After fork: new session, PR_SET_PDEATHSIG C->pdeath_sig (exit 127 if
 * C->parent is gone already), default signals and an empty signal mask,
 * stdin C->in_fd (or /dev/null), stdout and stderr on C->out_fd, then
 * C->ids taken (and PR_SET_PDEATHSIG set again: a change of identity
 * clears it), chdir to C->cwd, every fd from 3 up closed on exec but
 * C->keep, then execve EXE with ARGV and ENV.
 * On failure writes errno to C->errfd and exits 127: never returns. */
void kx_child_exec(const char *exe, char **argv, char **env, const kx_child_t *c);

/* The path of helper PROGRAM (kbox-engine, kbox-http, kbox-seccomp):
 * beside our own program (pkglibexecdir), or, run from a build tree by
 * libtool (.libs/), beside that.  0 or -1. */
int kx_helper_path(const char *program, char *path, size_t size);

/* Kill the child PID with SIGKILL and wait for it (through EINTR). */
void kx_kill_wait(pid_t pid);

/* When process PID started, in clock ticks after boot (/proc/PID/stat's
 * field 22): with the pid, a name of the process that no later one has.
 * -1 when there is no such process, or it has ended (a zombie). */
long long kx_proc_start_time(pid_t pid);

/* ---- kx_json.c ---- */

/* What decoding the JSON text P (N bytes) would take in memory, about:
 * the text itself, and for every container and every member or element
 * what jansson allocates for it (an array or object ~200 bytes with its
 * table, a scalar or pair ~64).  Read without allocating anything: a
 * small text of many tiny values ("[[],[],...]", ~3 bytes apiece) would
 * otherwise take ~60 times its size. */
size_t kx_json_cost(const char *p, size_t n);

/* In the JSON text T (LEN bytes), each escape of a lone UTF-16 surrogate
 * in a string ("\ud800" not followed by a low one's escape, or a low one
 * alone: JSON's grammar allows them, jansson refuses them, and Python's
 * json writes them, os.fsdecode's names for one) made "\ufffd", in place
 * (the same six bytes).  How many were. */
size_t kx_json_lone_surrogates(char *t, size_t len);

/* ---- kx_base64.c ---- */

/* DATA[0..LEN) in base64 (RFC 4648, the standard alphabet, with '='
 * padding), a new NUL-terminated string; its length in *OUT_LEN (may be
 * NULL).  NULL on ENOMEM. */
char *kx_base64_encode(const void *data, size_t len, size_t *out_len);

/* Decode the base64 TEXT[0..LEN) (the standard alphabet; '=' padding
 * optional; line breaks skipped) into OUT, which holds LEN / 4 * 3 + 3
 * bytes; its length in *OUT_LEN.  0, or -1 when TEXT is no base64. */
int kx_base64_decode(const char *text, size_t len, unsigned char *out, size_t *out_len);

/* ---- kx_sha256.c ---- */

/* SHA-256 (FIPS 180-4), fed in pieces: init, update..., final (which
 * clears the state). */
#define KX_SHA256_LEN 32
typedef struct {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t used;
} kx_sha256_t;
void kx_sha256_init(kx_sha256_t *c);
void kx_sha256_update(kx_sha256_t *c, const void *data, size_t len);
void kx_sha256_final(kx_sha256_t *c, unsigned char out[KX_SHA256_LEN]);

/* HMAC-SHA-256 (RFC 2104) under KEY[0..KEY_LEN), fed in pieces. */
typedef struct {
	kx_sha256_t inner, outer;
} kx_hmac_sha256_t;
void kx_hmac_sha256_init(kx_hmac_sha256_t *m, const void *key, size_t key_len);
void kx_hmac_sha256_update(kx_hmac_sha256_t *m, const void *data, size_t len);
void kx_hmac_sha256_final(kx_hmac_sha256_t *m, unsigned char out[KX_SHA256_LEN]);

/* Whether A[0..LEN) and B[0..LEN) are equal, in a time that does not
 * depend on where they differ (for comparing a MAC). */
bool kx_equal_ct(const void *a, const void *b, size_t len);

#endif
