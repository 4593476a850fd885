/* tests/unit_common.c — the common module (src/common/kx.h) against its
 * promises: the clocks, durations and sizes as text, UTF-8 (check, repair,
 * cut, count), the string buffer, growing arrays, the argv, closing
 * descriptors, first lines, writing files (all of a buffer, temporary
 * names, atomic replacement), base64, timestamps.  It links libkx alone:
 * the module needs nothing but libc. */
#include "config.h"
#include "common/kx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "tmpdir.h"

/* ---- clocks ---- */

TEST(now_ms_never_goes_back)
{
	long long a = kx_now_ms(), b = kx_now_ms();

	CHECK(a > 0);
	CHECK(b >= a);
}

/* (not time(2): glibc's reads the coarse clock, which can lag
 * CLOCK_REALTIME by a tick and put T after AFTER) */
TEST(wall_s_is_the_time_of_day)
{
	struct timespec a, b;
	double t;
	clock_gettime(CLOCK_REALTIME, &a);
	t = kx_wall_s();
	clock_gettime(CLOCK_REALTIME, &b);

	CHECK(t >= (double)a.tv_sec + a.tv_nsec / 1000 / 1e6 &&
	      t <= (double)b.tv_sec + b.tv_nsec / 1000 / 1e6);
}

/* ---- durations and sizes ---- */

/* kx_fmt_ms of MS must be WANT, and return its buffer. */
static void check_ms(long long ms, const char *want)
{
	char buf[32];

	CHECK(kx_fmt_ms(buf, sizeof buf, ms) == buf);
	CHECK_STR_EQ(buf, want);
}

TEST(fmt_ms_says_whole_seconds_tenths_or_milliseconds)
{
	check_ms(0, "0 s");
	check_ms(1, "1 ms");
	check_ms(200, "200 ms");
	check_ms(999, "999 ms");
	check_ms(1000, "1 s");
	check_ms(1001, "1.0 s");
	check_ms(1500, "1.5 s");
	check_ms(2000, "2 s");
	check_ms(90000, "90 s");
	check_ms(4000000000LL, "4000000 s"); /* beyond an int: no clamp needed */
}

TEST(fmt_ms_is_cut_to_its_buffer)
{
	char buf[4] = "xxx";

	kx_fmt_ms(buf, sizeof buf, 123456);
	CHECK_STR_EQ(buf, "123");
}

/* kx_fmt_bytes of N must be WANT, and return its buffer. */
static void check_bytes(long long n, const char *want)
{
	char buf[32];

	CHECK(kx_fmt_bytes(buf, sizeof buf, n) == buf);
	CHECK_STR_EQ(buf, want);
}

TEST(fmt_bytes_says_bytes_below_one_kib)
{
	check_bytes(0, "0 bytes");
	check_bytes(1, "1 byte");
	check_bytes(2, "2 bytes");
	check_bytes(100, "100 bytes");
	check_bytes(1023, "1023 bytes");
}

TEST(fmt_bytes_says_whole_units_when_exact)
{
	check_bytes(1024, "1 KiB");
	check_bytes(16384, "16 KiB");
	check_bytes(1LL << 20, "1 MiB");
	check_bytes(300LL << 20, "300 MiB");
	check_bytes(512LL << 20, "512 MiB");
	check_bytes(1LL << 30, "1 GiB");
	check_bytes(4LL << 30, "4 GiB");
	check_bytes(1LL << 40, "1 TiB");
	check_bytes(1LL << 50, "1024 TiB"); /* TiB is the largest unit */
}

TEST(fmt_bytes_says_one_decimal_otherwise)
{
	check_bytes(1025, "1.0 KiB");
	check_bytes(1536, "1.5 KiB");
	check_bytes(145122918, "138.4 MiB"); /* kbox-status(1)'s example */
	check_bytes(3LL << 29, "1.5 GiB");
	check_bytes((1LL << 40) + (1LL << 39), "1.5 TiB");
}

/* Just below a unit, the value that would print as 1024.0 of the unit
 * below is said in the unit itself. */
TEST(fmt_bytes_never_says_1024_of_a_unit)
{
	check_bytes((1LL << 20) - 1, "1.0 MiB");
	check_bytes((1LL << 30) - 1, "1.0 GiB");
	check_bytes((1LL << 40) - 1, "1.0 TiB");
	check_bytes((1LL << 20) - 52, "1023.9 KiB"); /* 1023.949…: rounds down */
	check_bytes((1LL << 20) - 51, "1.0 MiB");    /* 1023.950…: would round up */
}

TEST(fmt_bytes_of_a_negative_size_is_a_dash)
{
	check_bytes(-1, "-");
	check_bytes(INT64_MIN, "-");
}

TEST(msgf_that_fits_is_the_whole_message)
{
	char buf[16];

	CHECK(kx_msgf(buf, sizeof buf, "%s: %d", "pids", 64));
	CHECK_STR_EQ(buf, "pids: 64");
	CHECK(kx_msgf(buf, sizeof buf, "%s", "exactly 15 byte"));
	CHECK_STR_EQ(buf, "exactly 15 byte");
}

TEST(msgf_that_is_cut_ends_in_dots)
{
	char buf[16];

	CHECK(!kx_msgf(buf, sizeof buf, "cannot create %s", "/sys/fs/cgroup/kbox"));
	CHECK_STR_EQ(buf, "cannot creat...");
	CHECK(strlen(buf) == sizeof buf - 1);
}

/* A cut never leaves part of a character: the text stays UTF-8. */
TEST(msgf_cuts_between_characters)
{
	char buf[9];

	/* "ab" then U+00E9 x4: the 5 bytes before the mark end inside the second */
	CHECK(!kx_msgf(buf, sizeof buf, "ab%s", "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"));
	CHECK_STR_EQ(buf, "ab\xc3\xa9...");
	CHECK(kx_utf8_valid(buf, strlen(buf)));
}

TEST(msgf_into_a_tiny_buffer_cuts_without_the_mark)
{
	char buf[4] = "xxx", none[1] = {'x'};

	CHECK(!kx_msgf(buf, sizeof buf, "%s", "abcdef"));
	CHECK_STR_EQ(buf, "abc");
	CHECK(!kx_msgf(none, 0, "%s", "abc"));
	CHECK(none[0] == 'x'); /* SIZE 0: nothing written */
}

#define ELLIPSIS "\xe2\x80\xa6" /* U+2026 */

TEST(fmt_middle_keeps_a_short_path_whole)
{
	char buf[32];

	CHECK_STR_EQ(kx_fmt_middle(buf, sizeof buf, "/tmp/st", 20), "/tmp/st");
	CHECK_STR_EQ(kx_fmt_middle(buf, sizeof buf, "0123456789abcdefghij", 20),
	             "0123456789abcdefghij");
}

/* A longer one is its two ends around "…" (3 bytes), MAX bytes in all. */
TEST(fmt_middle_shows_a_long_path_by_its_ends)
{
	char buf[32];

	CHECK_STR_EQ(kx_fmt_middle(buf, sizeof buf, "/aaaaaaaaaa/bbbbbbbbbb/cccccccccc", 15),
	             "/aaaaa" ELLIPSIS "cccccc");
	CHECK(strlen(buf) == 15);
	/* MAX larger than BUF holds: BUF's size wins */
	CHECK_STR_EQ(kx_fmt_middle(buf, 10, "/aaaaaaaaaa/bbbbbbbbbb", 40), "/aa" ELLIPSIS "bbb");
}

/* Neither end keeps part of a character. */
TEST(fmt_middle_cuts_between_characters)
{
	char buf[32];

	/* U+00E9 x8: each half's cut falls inside one */
	kx_fmt_middle(buf, sizeof buf,
	              "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 12);
	CHECK_STR_EQ(buf, "\xc3\xa9\xc3\xa9" ELLIPSIS "\xc3\xa9\xc3\xa9");
	CHECK(kx_utf8_valid(buf, strlen(buf)));
}

/* ---- UTF-8 ---- */

#define FFFD "\xef\xbf\xbd"
#define VALID(s) kx_utf8_valid(s, sizeof s - 1)

TEST(utf8_valid_accepts_every_well_formed_length)
{
	CHECK(VALID(""));
	CHECK(VALID("plain ascii\n"));
	CHECK(VALID("caf\xc3\xa9"));              /* 2 bytes */
	CHECK(VALID("\xe2\x82\xac"));             /* 3 bytes */
	CHECK(VALID("\xf0\x9f\x98\x80"));         /* 4 bytes */
	CHECK(VALID("\xc2\x80\xdf\xbf"));         /* U+0080, U+07FF */
	CHECK(VALID("\xe0\xa0\x80\xef\xbf\xbf")); /* U+0800, U+FFFF */
	CHECK(VALID("\xed\x9f\xbf\xee\x80\x80")); /* U+D7FF, U+E000: around the surrogates */
	CHECK(VALID("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf")); /* U+10000, U+10FFFF */
	CHECK(VALID("a\0b"));                             /* U+0000 is a character */
}

TEST(utf8_valid_refuses_cut_overlong_surrogate_and_stray_bytes)
{
	CHECK(!VALID("\xc3")); /* cut short */
	CHECK(!VALID("a\xe2\x82"));
	CHECK(!VALID("\xf0\x9f\x98"));
	CHECK(!VALID("\xe2\x82"
	             "A"));        /* cut, then a character */
	CHECK(!VALID("\xc0\xaf")); /* overlong '/' */
	CHECK(!VALID("\xc1\xbf"));
	CHECK(!VALID("\xe0\x80\x80"));     /* overlong NUL */
	CHECK(!VALID("\xe0\x9f\xbf"));     /* overlong U+07FF */
	CHECK(!VALID("\xf0\x8f\xbf\xbf")); /* overlong U+FFFF */
	CHECK(!VALID("\xed\xa0\x80"));     /* U+D800 */
	CHECK(!VALID("\xed\xbf\xbf"));     /* U+DFFF */
	CHECK(!VALID("\xf4\x90\x80\x80")); /* beyond U+10FFFF */
	CHECK(!VALID("\xf5\x80\x80\x80"));
	CHECK(!VALID("\x80")); /* a lone continuation byte */
	CHECK(!VALID("\xff"));
	CHECK(!VALID("\xe2\x82\xac\xac")); /* one continuation byte too many */
}

/* kx_utf8_repair of the LEN bytes at IN must give exactly WANT. */
static void check_repair(const char *in, size_t len, const char *want, size_t want_len)
{
	size_t n = 12345;
	char *out = kx_utf8_repair(in, len, &n);

	REQUIRE(out != NULL);
	CHECK_INT_EQ(n, want_len);
	CHECK(n == want_len && memcmp(out, want, want_len) == 0);
	CHECK_INT_EQ(out[n], '\0');
	CHECK(kx_utf8_valid(out, n));
	free(out);
}

#define REPAIR(in, want) check_repair(in, sizeof in - 1, want, sizeof want - 1)

TEST(utf8_valid_str_checks_a_c_string_and_refuses_null)
{
	CHECK(kx_utf8_valid_str(""));
	CHECK(kx_utf8_valid_str("caf\xc3\xa9"));
	CHECK(!kx_utf8_valid_str("caf\xc3"));
	CHECK(!kx_utf8_valid_str(NULL));
}

TEST(utf8_repair_copies_valid_text_byte_for_byte)
{
	REPAIR("", "");
	REPAIR("plain ascii\n", "plain ascii\n");
	REPAIR("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf",
	       "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
	REPAIR("a\0b", "a\0b"); /* U+0000 is a character like any other */
}

/* The expectations are Python's b"…".decode("utf-8", "replace"), which is
 * what jupyter_client does with a message that is not UTF-8. */
TEST(utf8_repair_replaces_each_maximal_ill_formed_subpart_as_python)
{
	REPAIR("\xff", FFFD);
	REPAIR("\x80\x80", FFFD FFFD);                   /* lone continuation bytes */
	REPAIR("\xc0\xaf", FFFD FFFD);                   /* overlong '/' */
	REPAIR("\xe0\x80\x80", FFFD FFFD FFFD);          /* overlong NUL */
	REPAIR("\xed\xa0\x80", FFFD FFFD FFFD);          /* a surrogate */
	REPAIR("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* beyond U+10FFFF */
	REPAIR("\xf5\x80", FFFD FFFD);
	REPAIR("\xe2\x82"
	       "A",
	       FFFD "A"); /* cut, then a character */
	REPAIR("\xe0\xa0\xc0", FFFD FFFD);
	REPAIR("a\xc3", "a" FFFD); /* cut at the end */
	REPAIR("\xf0\x9f\x98", FFFD);
	/* Unicode's own example (table 3-8) */
	REPAIR("a\xf1\x80\x80\xe1\x80\xc2"
	       "b\x80"
	       "c\x80\xbf"
	       "d",
	       "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d");
}

TEST(utf8_repair_accepts_a_null_out_len)
{
	char *out = kx_utf8_repair("x\xff", 2, NULL);

	CHECK_STR_EQ(out, "x" FFFD);
	free(out);
}

#define FLOOR(s, max) kx_utf8_floor(s, sizeof s - 1, max)

TEST(utf8_floor_keeps_whole_characters_of_every_length)
{
	/* "a" é € 😀: characters at 0, 1, 3, 6; 10 bytes */
	const char s[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	static const size_t want[11] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10};

	for (size_t max = 0; max <= 10; max++)
		CHECK_INT_EQ(FLOOR(s, max), want[max]);
	CHECK_INT_EQ(FLOOR(s, 1000), 10); /* MAX beyond the text: all of it */
	CHECK_INT_EQ(FLOOR("", 5), 0);
	CHECK_INT_EQ(FLOOR("abc", 2), 2);
}

TEST(utf8_floor_drops_a_character_that_the_end_cut_short)
{
	CHECK_INT_EQ(FLOOR("ab\xe2\x82", 4), 2);
	CHECK_INT_EQ(FLOOR("ab\xe2\x82", 100), 2);
	CHECK_INT_EQ(FLOOR("ab\xf0\x9f\x98", 5), 2);
	CHECK_INT_EQ(FLOOR("ab\xc3", 3), 2);
}

/* Ill-formed bytes are cut as kx_utf8_repair reads them: between
 * subparts, never inside one. */
TEST(utf8_floor_cuts_ill_formed_text_between_subparts)
{
	CHECK_INT_EQ(FLOOR("\xed\xa0\x80", 2), 2); /* a surrogate: 3 subparts of 1 */
	CHECK_INT_EQ(FLOOR("\xc0\xaf", 1), 1);     /* overlong: 2 of 1 */
	CHECK_INT_EQ(FLOOR("\xe2\x82"
	                   "A",
	                   1),
	             0); /* one subpart of 2, then "A" */
	CHECK_INT_EQ(FLOOR("\xe2\x82"
	                   "A",
	                   2),
	             2);
	CHECK_INT_EQ(FLOOR("\x80\x80\x80\x80\x80", 4), 4); /* stray continuation bytes */
	CHECK_INT_EQ(FLOOR("\xe2\x82\xac\x80\x80", 4), 4); /* € then two strays */
	CHECK_INT_EQ(FLOOR("\xff\xff", 1), 1);
}

/* kx_name_escape of the C string IN gives exactly WANT. */
static bool escapes_to(const char *in, const char *want)
{
	char out[KX_NAME_ESCAPED_MAX(64)];
	size_t n = kx_name_escape(in, strlen(in), out, sizeof out);
	if (n == strlen(want) && strcmp(out, want) == 0)
		return true;
	fprintf(stderr, "# %s: got %s, want %s\n", in, out, want);
	return false;
}

TEST(utf8_blank_measures_spaces_of_every_width_and_nothing_else)
{
	CHECK_INT_EQ(kx_utf8_blank(" x", 2), 1);
	CHECK_INT_EQ(kx_utf8_blank("\tx", 2), 1);
	CHECK_INT_EQ(kx_utf8_blank("\xc2\xa0", 2), 2);     /* U+00A0 */
	CHECK_INT_EQ(kx_utf8_blank("\xe1\x9a\x80", 3), 3); /* U+1680 */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\x80\x80", 3), 3); /* U+2000 */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\x80\x8a", 3), 3); /* U+200A */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\x80\xaf", 3), 3); /* U+202F */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\x81\x9f", 3), 3); /* U+205F */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\xa0\x80", 3), 3); /* U+2800 */
	CHECK_INT_EQ(kx_utf8_blank("\xe3\x80\x80", 3), 3); /* U+3000 */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\x80\x8b", 3), 0); /* U+200B: invisible, not blank */
	CHECK_INT_EQ(kx_utf8_blank("\xe2\xa0\x81", 3), 0); /* U+2801: a dot */
	CHECK_INT_EQ(kx_utf8_blank("\xe3\x80\x80", 2), 0); /* cut short */
	CHECK_INT_EQ(kx_utf8_blank("\xc2\xa0", 1), 0);
	CHECK_INT_EQ(kx_utf8_blank("x", 1), 0);
	CHECK_INT_EQ(kx_utf8_blank("", 0), 0);
	CHECK_INT_EQ(kx_utf8_blank("\n", 1), 0); /* a line break is no blank */
}

TEST(name_escape_shows_invisible_format_characters_as_u_escapes)
{
	static const unsigned cps[] = {0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
	                               0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c,
	                               0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x00ad, 0x034f,
	                               0x180e, 0x2064, 0x206f, 0x3164, 0xfe0f, 0xfffb};
	for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
		char in[16], want[32];
		unsigned c = cps[i];
		if (c < 0x800)
			snprintf(in, sizeof in, "a%c%cb", 0xc0 | (c >> 6), 0x80 | (c & 0x3f));
		else
			snprintf(in, sizeof in, "a%c%c%cb", 0xe0 | (c >> 12),
			         0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
		snprintf(want, sizeof want, "a\\u%04xb", c);
		CHECK(escapes_to(in, want));
	}
	/* beyond the BMP: a tag, as Python writes it */
	CHECK(escapes_to("a\xf3\xa0\x80\x81"
	                 "b",
	                 "a\\U000e0001b"));
	/* a letter, a symbol: as they are */
	CHECK(escapes_to("\xc3\xa9\xf0\x9f\x98\x80", "\xc3\xa9\xf0\x9f\x98\x80"));
}

TEST(name_escape_shows_controls_bad_bytes_and_backslashes_escaped)
{
	CHECK(escapes_to("a\nb\tc\rd", "a\\nb\\tc\\rd"));
	CHECK(escapes_to("x\\y", "x\\\\y"));
	CHECK(escapes_to("\x1b[2J\x7f", "\\x1b[2J\\x7f"));
	CHECK(escapes_to("\xc2\x9b", "\\xc2\\x9b"));          /* C1 CSI */
	CHECK(escapes_to("\xff\xe2\x82", "\\xff\\xe2\\x82")); /* not UTF-8 */
}

TEST(name_escape_keeps_ordinary_utf8)
{
	CHECK(escapes_to("caf\xc3\xa9", "caf\xc3\xa9"));
	CHECK(escapes_to("\xe4\xb8\xad\xe6\x96\x87", "\xe4\xb8\xad\xe6\x96\x87"));
	CHECK(escapes_to("\xf0\x9f\x98\x80 \xc2\xa0", "\xf0\x9f\x98\x80 \xc2\xa0"));
}

TEST(name_escape_stops_before_an_escape_that_does_not_fit)
{
	char out[6];
	CHECK_INT_EQ(kx_name_escape("ab\xff", 3, out, sizeof out), 2);
	CHECK(strcmp(out, "ab") == 0);
	CHECK_INT_EQ(kx_name_escape("abc", 3, out, 1), 0);
	CHECK(out[0] == '\0');
}

#define COUNT(s) kx_utf8_count(s, sizeof s - 1)

TEST(utf8_count_counts_code_points)
{
	CHECK_INT_EQ(COUNT(""), 0);
	CHECK_INT_EQ(COUNT("abc"), 3);
	CHECK_INT_EQ(COUNT("a\0b"), 3);
	CHECK_INT_EQ(COUNT("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), 3);
}

TEST(utf8_count_counts_each_ill_formed_subpart_once_as_repair_makes_it)
{
	CHECK_INT_EQ(COUNT("\xe2\x82"
	                   "A"),
	             2);
	CHECK_INT_EQ(COUNT("\xed\xa0\x80"), 3);
	CHECK_INT_EQ(COUNT("\xc0\xaf"), 2);
	CHECK_INT_EQ(COUNT("a\xf0\x9f\x98"), 2);
	CHECK_INT_EQ(COUNT("a\xf1\x80\x80\xe1\x80\xc2"
	                   "b\x80"
	                   "c\x80\xbf"
	                   "d"),
	             10);
}

/* ---- the string buffer ---- */

TEST(buf_appends_bytes_strings_and_formats_in_order)
{
	kx_buf_t b = KX_BUF_INIT;
	size_t n = 0;
	char *s;

	CHECK_INT_EQ(kx_buf_append(&b, "ab", 2), 0);
	CHECK_INT_EQ(kx_buf_appends(&b, "cd"), 0);
	CHECK_INT_EQ(kx_buf_appendf(&b, "%d-%s", 42, "x"), 0);
	CHECK_INT_EQ(kx_buf_append(&b, "\0z", 2), 0); /* NUL bytes too */
	s = kx_buf_take(&b, &n);
	CHECK_INT_EQ(n, 10);
	CHECK(s && memcmp(s, "abcd42-x\0z", 11) == 0);
	free(s);
}

TEST(buf_appendf_longer_than_the_spare_room_comes_whole)
{
	kx_buf_t b = KX_BUF_INIT;
	char big[5000];
	char *s;

	memset(big, 'q', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	kx_buf_appends(&b, "<");
	CHECK_INT_EQ(kx_buf_appendf(&b, "%s>", big), 0);
	CHECK_INT_EQ(b.len, 1 + 4999 + 1);
	s = kx_buf_take(&b, NULL);
	REQUIRE(s != NULL);
	CHECK_INT_EQ(strlen(s), 5001);
	CHECK(s[0] == '<' && s[1] == 'q' && s[4999] == 'q' && s[5000] == '>');
	free(s);
}

TEST(buf_take_of_nothing_is_an_empty_string)
{
	kx_buf_t b = KX_BUF_INIT;
	size_t n = 7;
	char *s = kx_buf_take(&b, &n);

	CHECK_STR_EQ(s, "");
	CHECK_INT_EQ(n, 0);
	free(s);
}

TEST(buf_take_leaves_it_empty_for_reuse)
{
	kx_buf_t b = KX_BUF_INIT;
	char *first, *second;

	kx_buf_appends(&b, "one");
	first = kx_buf_take(&b, NULL);
	CHECK(b.data == NULL && b.len == 0 && b.cap == 0 && !b.failed);
	kx_buf_appends(&b, "two");
	second = kx_buf_take(&b, NULL);
	CHECK_STR_EQ(first, "one");
	CHECK_STR_EQ(second, "two");
	free(first);
	free(second);
}

TEST(buf_that_failed_refuses_appends_and_take_gives_null)
{
	kx_buf_t b = KX_BUF_INIT;

	CHECK_INT_EQ(kx_buf_appends(&b, "kept"), 0);
	CHECK_INT_EQ(kx_buf_append(&b, "x", SIZE_MAX), -1); /* cannot fit */
	CHECK(b.failed);
	CHECK_INT_EQ(kx_buf_appends(&b, "more"), -1);
	CHECK_INT_EQ(kx_buf_appendf(&b, "%d", 1), -1);
	CHECK_STR_EQ(b.data, "kept");
	CHECK(kx_buf_take(&b, NULL) == NULL);
	CHECK(b.data == NULL && b.len == 0 && !b.failed); /* and emptied */
}

/* Past KX_BUF_PREALLOC the spare room stays below that much. */
TEST(buf_growth_is_bounded_past_the_prealloc_size)
{
	kx_buf_t b = KX_BUF_INIT;
	static char chunk[65536];
	size_t i, worst = 0;

	memset(chunk, 'z', sizeof chunk);
	for (i = 0; i < 48; i++) { /* 3 MiB */
		REQUIRE(kx_buf_append(&b, chunk, sizeof chunk) == 0);
		if (b.len >= KX_BUF_PREALLOC && b.cap - b.len > worst)
			worst = b.cap - b.len;
	}
	CHECK_INT_EQ(b.len, 48 * sizeof chunk);
	CHECK(worst <= KX_BUF_PREALLOC + 1);
	CHECK(b.data[b.len - 1] == 'z' && b.data[b.len] == '\0');
	kx_buf_reset(&b);
	CHECK(b.data == NULL && b.len == 0);
}

/* ---- the argv ---- */

/* ---- kernel text: kbox's own lines quoted (kx_quote.c) ---- */

/* Text of COUNT copies of the LEN bytes at UNIT, then TAIL; in *N its
 * length.  New. */
static char *repeat(const char *unit, size_t len, size_t count, const char *tail, size_t *n)
{
	size_t tl = strlen(tail);
	char *s = malloc(len * count + tl + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < count; i++)
		memcpy(s + i * len, unit, len);
	memcpy(s + len * count, tail, tl + 1);
	*n = len * count + tl;
	return s;
}

/* Whether kx_buf_kernel makes of IN (N bytes) the same text with one
 * backslash before its last line, TAIL, which reads as kbox's own. */
static bool kernel_quotes_the_tail_only(const char *in, size_t n, const char *tail)
{
	kx_buf_t b = KX_BUF_INIT;
	size_t tl = strlen(tail);
	bool ok;

	kx_buf_kernel(&b, in, n);
	ok = !b.failed && b.len == n + 1 && memcmp(b.data, in, n - tl) == 0 &&
	     b.data[n - tl] == '\\' && memcmp(b.data + n - tl + 1, tail, tl) == 0;
	free(b.data);
	return ok;
}

TEST(kernel_text_quotes_a_line_that_reads_as_kboxs_after_unseen_characters)
{
	kx_buf_t b = KX_BUF_INIT;

	/* zero-width spaces, an escape sequence, blanks and backslashes
	 * before it are passed over */
	kx_buf_kernel(&b, "\xe2\x80\x8b\x1b[31m \\[stderr] x\nok\n", 24);
	CHECK_STR_EQ(b.data, "\\\xe2\x80\x8b\x1b[31m \\[stderr] x\nok\n");
	kx_buf_reset(&b);
	/* U+2028 and U+2029 end a line: the next line is looked at as one */
	kx_buf_kernel(&b, "\xe2\x80\xa8[note: a]\xe2\x80\xa9Out[1]: b", 24);
	CHECK_STR_EQ(b.data, "\xe2\x80\xa8\\[note: a]\xe2\x80\xa9\\Out[1]: b");
	kx_buf_reset(&b);
	/* what a terminal gives no width: Hangul vowels (U+1161, U+D7B0), a
	 * mark of Unicode 15 (U+11F00), a code point not assigned (U+0378) */
	kx_buf_kernel(&b, "\xe1\x85\xa1\xed\x9e\xb0[note: a]\n", 16);
	CHECK_STR_EQ(b.data, "\\\xe1\x85\xa1\xed\x9e\xb0[note: a]\n");
	kx_buf_reset(&b);
	kx_buf_kernel(&b, "\xf0\x91\xbc\x80\xcd\xb8[note: a]\n", 16);
	CHECK_STR_EQ(b.data, "\\\xf0\x91\xbc\x80\xcd\xb8[note: a]\n");
	kx_buf_reset(&b);
	/* nor one Unicode 15 assigned, which Unicode 14's terminals do not
	 * draw (U+1F6DC) */
	kx_buf_kernel(&b, "\xf0\x9f\x9b\x9c[note: a]\n", 14);
	CHECK_STR_EQ(b.data, "\\\xf0\x9f\x9b\x9c[note: a]\n");
	kx_buf_reset(&b);
}

/* 2 MiB of line separators, or of escape sequences that never end, one a
 * line: each line is looked at alone (once each looked past its end, to
 * the end of the text, and this took hours) */
TEST(kernel_text_of_2_mib_of_short_lines_is_kept_and_its_last_forged_line_quoted)
{
	static const char *const units[] = {"\xe2\x80\xa8", "\xe2\x80\xa9", "\x1b]\n", "\x1b[1\n",
	                                    "\xe2\x80\x8b\xe2\x80\xa8"};
	const char *tail = "[stderr] forged";

	for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
		size_t len = strlen(units[u]), n = 0;
		char *in = repeat(units[u], len, ((size_t)2 << 20) / len, tail, &n);
		REQUIRE(in != NULL);
		CHECK(kernel_quotes_the_tail_only(in, n, tail));
		free(in);
	}
}

/* ---- kernel text on a terminal, as it comes (kx_live_t) ---- */

/* What a live quoter wrote: "1:" or "2:" before each stream's run. */
typedef struct {
	kx_buf_t out;
	int last;
} live_log_t;

static void live_log(void *arg, int stream, const char *s, size_t len)
{
	live_log_t *l = arg;
	if (stream != l->last)
		kx_buf_appendf(&l->out, "%d:", stream);
	l->last = stream;
	kx_buf_append(&l->out, s, len);
}

/* The text a quoter writes of the pieces PIECES (NULL-ended; a piece
 * that begins with "2:" is standard error's), into OUT (SIZE bytes),
 * and what it had written before the end in *BEFORE_END (its length). */
static const char *live_run(const char *const *pieces, char *out, size_t size, size_t *before_end)
{
	live_log_t l = {KX_BUF_INIT, 1};
	kx_live_t q;

	kx_live_init(&q, live_log, &l);
	for (size_t i = 0; pieces[i]; i++) {
		bool err = strncmp(pieces[i], "2:", 2) == 0;
		const char *t = pieces[i] + (err ? 2 : 0);
		kx_live_text(&q, err ? 2 : 1, t, strlen(t));
	}
	if (before_end)
		*before_end = l.out.len;
	kx_live_end(&q);
	snprintf(out, size, "%.*s", (int)l.out.len, l.out.data ? l.out.data : "");
	kx_buf_reset(&l.out);
	return out;
}

TEST(live_text_quotes_a_line_that_reads_as_kboxs_and_no_other)
{
	char out[256];
	const char *const whole[] = {"[note: forged]\nok\nabc [note: x]\n", NULL};
	const char *const bar[] = {"\r0%", "\r50%", "\r100%", "\n", NULL};
	/* the first line after a line break, that nothing drew over, is
	 * judged whole: "[no" is no line of kbox's */
	const char *const after[] = {"ok\n[no\n", NULL};

	CHECK_STR_EQ(live_run(whole, out, sizeof out, NULL),
	             "\\[note: forged]\nok\nabc [note: x]\n");
	CHECK_STR_EQ(live_run(bar, out, sizeof out, NULL), "\r0%\r50%\r100%\n");
	CHECK_STR_EQ(live_run(after, out, sizeof out, NULL), "ok\n[no\n");
}

TEST(live_text_holds_a_line_start_until_it_can_be_told)
{
	char out[256];
	size_t before = 0;
	const char *const split[] = {"[no", "te: forged]\n", NULL};
	const char *const told[] = {"Processing", NULL};
	const char *const kbox[] = {"kbox", NULL};
	const char *const zero[] = {"0\n", "\r0\r1\r", "2\n", NULL};
	/* a fullwidth bracket cut between two pieces */
	const char *const cut[] = {"\xef\xbc", "\xbbnote: x]\n", NULL};

	CHECK_STR_EQ(live_run(split, out, sizeof out, NULL), "\\[note: forged]\n");
	/* what cannot begin a line of kbox's goes at once */
	CHECK_STR_EQ(live_run(told, out, sizeof out, &before), "Processing");
	CHECK(before == 10);
	/* what may yet is held to the end, which ends its line (kbox exec
	 * ends it): alone on its line, it is no line of kbox's */
	CHECK_STR_EQ(live_run(kbox, out, sizeof out, &before), "kbox");
	CHECK(before == 0);
	/* nor is a "0" ("Out[" may begin so), nor one over another */
	CHECK_STR_EQ(live_run(zero, out, sizeof out, NULL), "0\n\r0\r1\r2\n");
	CHECK_STR_EQ(live_run(cut, out, sizeof out, NULL), "\\\xef\xbc\xbbnote: x]\n");
}

/* A carriage return lets a later segment draw over a line's start: "[not"
 * over "    e: forged]" shows "[note: forged]"; blanks over "XXX[note:
 * x]" show a line that reads as kbox's after them */
TEST(live_text_quotes_what_may_draw_a_line_of_kboxs_over_another)
{
	char out[256];
	const char *const over[] = {"ok\n    e: forged]\r", "[not\n", NULL};
	const char *const blanks[] = {"ok\nXXX[note: x]\r", "   \r\n", NULL};
	/* standard error draws on the same screen: standard output's held
	 * beginning ends where it begins */
	const char *const both[] = {"ok\n", "[no", "2:x\n", NULL};
	/* a tab goes over what a line showed, without writing it:
	 * "[\the kernel" over "Xnote: t" shows "[note: the kernel" */
	const char *const tab[] = {"Xnote: t\r", "[\the kernel\n", "[\tx\n", NULL};
	const char *const wide[] = {"ok\n\xf3\xa0\x81\x81]\r", "[stderr\n", NULL};

	CHECK_STR_EQ(live_run(over, out, sizeof out, NULL), "ok\n    e: forged]\r\\[not\n");
	CHECK_STR_EQ(live_run(blanks, out, sizeof out, NULL), "ok\nXXX[note: x]\r\\   \r\n");
	CHECK_STR_EQ(live_run(both, out, sizeof out, NULL), "ok\n\\[no2:x\n");
	/* a character above U+FFFF that shows as its escape ("\ue0041") takes
	 * 7 columns: "[stderr" does not cover "\ue0041]" */
	CHECK_STR_EQ(live_run(wide, out, sizeof out, NULL), "ok\n\xf3\xa0\x81\x81]\r\\[stderr\n");
	/* (on a line that showed nothing before, a tab is a blank) */
	CHECK_STR_EQ(live_run(tab, out, sizeof out, NULL), "Xnote: t\r\\[\the kernel\n[\tx\n");
}

TEST(argv_add_copies_every_string_up_to_the_null)
{
	kx_argv_t a = KX_ARGV_INIT;
	char bind[] = "/srv/data";
	char **v;

	CHECK_INT_EQ(kx_argv_add(&a, "bwrap", NULL), 0);
	CHECK_INT_EQ(kx_argv_add(&a, "--ro-bind", bind, "/data", NULL), 0);
	CHECK_INT_EQ(kx_argv_add(&a, "--hostname", "kbox", NULL), 0);
	bind[1] = 'X'; /* copies, not the caller's strings */
	CHECK_INT_EQ(a.n, 6);
	v = kx_argv_take(&a);
	REQUIRE(v != NULL);
	CHECK_STR_EQ(v[0], "bwrap");
	CHECK_STR_EQ(v[1], "--ro-bind");
	CHECK_STR_EQ(v[2], "/srv/data");
	CHECK_STR_EQ(v[3], "/data");
	CHECK_STR_EQ(v[4], "--hostname");
	CHECK_STR_EQ(v[5], "kbox");
	CHECK(v[6] == NULL);
	CHECK(a.v == NULL && a.n == 0 && !a.failed);
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

TEST(argv_addf_formats_one_argument_of_any_length)
{
	kx_argv_t a = KX_ARGV_INIT;
	static char big[10000];
	char **v;

	memset(big, 'p', sizeof big - 1);
	CHECK_INT_EQ(kx_argv_addf(&a, "%d", 1000), 0);
	CHECK_INT_EQ(kx_argv_addf(&a, "/%s", big), 0); /* longer than PATH_MAX * 2 */
	CHECK_INT_EQ(a.n, 2);
	CHECK_STR_EQ(a.v[0], "1000");
	CHECK_INT_EQ(strlen(a.v[1]), sizeof big);
	CHECK(a.v[1][0] == '/' && a.v[1][1] == 'p');
	v = kx_argv_take(&a);
	REQUIRE(v != NULL);
	CHECK(v[2] == NULL);
	free(v[0]);
	free(v[1]);
	free(v);
}

TEST(argv_take_of_nothing_is_an_empty_argv)
{
	kx_argv_t a = KX_ARGV_INIT;
	char **v = kx_argv_take(&a);

	REQUIRE(v != NULL);
	CHECK(v[0] == NULL);
	free(v);
}

TEST(argv_that_failed_refuses_adds_and_take_gives_null)
{
	kx_argv_t a = KX_ARGV_INIT;

	CHECK_INT_EQ(kx_argv_add(&a, "kept", NULL), 0);
	a.failed = true; /* as after an allocation that failed */
	CHECK_INT_EQ(kx_argv_add(&a, "more", NULL), -1);
	CHECK_INT_EQ(kx_argv_addf(&a, "%d", 1), -1);
	CHECK_INT_EQ(a.n, 1);
	CHECK(kx_argv_take(&a) == NULL);
	CHECK(a.v == NULL && a.n == 0 && !a.failed); /* and emptied */
}

TEST(argv_reset_empties_it)
{
	kx_argv_t a = KX_ARGV_INIT;

	kx_argv_add(&a, "x", "y", NULL);
	kx_argv_reset(&a);
	CHECK(a.v == NULL && a.n == 0 && a.cap == 0 && !a.failed);
	CHECK_INT_EQ(kx_argv_add(&a, "z", NULL), 0);
	CHECK_STR_EQ(a.v[0], "z");
	kx_argv_reset(&a);
}

/* ---- files ---- */

TEST(write_all_writes_every_byte_or_fails_with_errno)
{
	int p[2];
	char got[16] = "";

	REQUIRE(pipe(p) == 0);
	CHECK_INT_EQ(kx_write_all(p[1], "hello", 5), 0);
	CHECK_INT_EQ(kx_write_all(p[1], "", 0), 0);
	close(p[1]);
	CHECK_INT_EQ(read(p[0], got, sizeof got - 1), 5);
	CHECK_STR_EQ(got, "hello");
	close(p[0]);
	errno = 0;
	CHECK_INT_EQ(kx_write_all(p[1], "x", 1), -1); /* closed */
	CHECK_INT_EQ(errno, EBADF);
}

TEST(pread_full_reads_all_it_is_asked_but_past_the_end)
{
	char path[] = "/tmp/kx-pread-XXXXXX", got[16];
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	unlink(path);
	REQUIRE(kx_write_all(fd, "0123456789", 10) == 0);
	memset(got, 0, sizeof got);
	CHECK_INT_EQ(kx_pread_full(fd, got, 4, 3), 4);
	CHECK_STR_EQ(got, "3456");
	memset(got, 0, sizeof got);
	CHECK_INT_EQ(kx_pread_full(fd, got, sizeof got, 6), 4); /* short: the end */
	CHECK_STR_EQ(got, "6789");
	CHECK_INT_EQ(kx_pread_full(fd, got, sizeof got, 10), 0);
	CHECK_INT_EQ(kx_pread_full(fd, got, sizeof got, 99), 0);
	close(fd);
	errno = 0;
	CHECK_INT_EQ(kx_pread_full(fd, got, 1, 0), -1);
	CHECK_INT_EQ(errno, EBADF);
}

/* The names in DIR other than . and .., sorted, joined by spaces. */
static void list_dir(const char *dir, char *out, size_t size)
{
	struct dirent **e;
	int n = scandir(dir, &e, NULL, alphasort), used = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(e[i]->d_name, ".") && strcmp(e[i]->d_name, "..") && used < (int)size)
			used += snprintf(out + used, size - (size_t)used, "%s%s", used ? " " : "",
			                 e[i]->d_name);
		free(e[i]);
	}
	if (n >= 0)
		free(e);
}

/* The content of PATH (at most SIZE - 1 bytes) into OUT; its length, or -1. */
static long read_path(const char *path, char *out, size_t size)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, out, size - 1);
	close(fd);
	if (n >= 0)
		out[n] = '\0';
	return (long)n;
}

/* A private directory for one test: its name in DIR, open in *FD. */
static bool temp_dir(const char *tag, char **dir, int *fd)
{
	*dir = test_mkdtemp(tag);
	*fd = *dir ? open(*dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	return *fd >= 0;
}

TEST(temp_open_makes_a_new_file_named_prefix_and_64_random_bits)
{
	char *dir, name[64], other[64], path[4200], listing[256];
	struct stat st;
	int dfd, fd, fd2;
	mode_t mask = umask(022);

	REQUIRE(temp_dir("kx-temp", &dir, &dfd));
	fd = kx_temp_open(dfd, ".kbox-get-", 0644, name, sizeof name);
	fd2 = kx_temp_open(dfd, ".kbox-get-", 0644, other, sizeof other);
	umask(mask);
	CHECK(fd >= 0 && fd2 >= 0);
	CHECK_INT_EQ(strlen(name), strlen(".kbox-get-") + 16);
	CHECK(strncmp(name, ".kbox-get-", 10) == 0 && strspn(name + 10, "0123456789abcdef") == 16);
	CHECK(strcmp(name, other) != 0);
	CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0644);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK_INT_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_WRONLY);
	CHECK_INT_EQ(write(fd, "x", 1), 1);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	CHECK(stat(path, &st) == 0 && st.st_size == 1);
	list_dir(dir, listing, sizeof listing);
	CHECK_INT_EQ(strlen(listing), 2 * 26 + 1);
	close(fd);
	close(fd2);
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

TEST(temp_open_refuses_a_name_longer_than_its_buffer)
{
	char *dir, name[20], listing[64];
	int dfd;

	REQUIRE(temp_dir("kx-temp", &dir, &dfd));
	errno = 0;
	CHECK_INT_EQ(kx_temp_open(dfd, ".kbox-get-", 0600, name, sizeof name), -1);
	CHECK_INT_EQ(errno, ENAMETOOLONG);
	list_dir(dir, listing, sizeof listing);
	CHECK_STR_EQ(listing, ""); /* nothing made */
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

TEST(write_atomic_gives_the_content_and_the_mode_exactly_and_leaves_no_temp)
{
	char *dir, path[4200], got[64], listing[256];
	struct stat st;
	int dfd;
	mode_t mask = umask(077); /* the mode is MODE whatever the umask */

	REQUIRE(temp_dir("kx-atomic", &dir, &dfd));
	CHECK_INT_EQ(kx_write_atomic(dfd, "state.json", "{\"a\": 1}\n", 9, 0640, 0), 0);
	CHECK_INT_EQ(kx_write_atomic(dfd, "durable", "x\0y", 3, 0600, KX_DURABLE), 0);
	CHECK_INT_EQ(kx_write_atomic(dfd, "empty", "", 0, 0644, 0), 0);
	umask(mask);
	snprintf(path, sizeof path, "%s/state.json", dir);
	CHECK_INT_EQ(read_path(path, got, sizeof got), 9);
	CHECK_STR_EQ(got, "{\"a\": 1}\n");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0640);
	snprintf(path, sizeof path, "%s/durable", dir);
	CHECK_INT_EQ(read_path(path, got, sizeof got), 3);
	CHECK(memcmp(got, "x\0y", 3) == 0);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
	snprintf(path, sizeof path, "%s/empty", dir);
	CHECK(stat(path, &st) == 0 && st.st_size == 0 && (st.st_mode & 07777) == 0644);
	list_dir(dir, listing, sizeof listing);
	CHECK_STR_EQ(listing, "durable empty state.json");
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

TEST(write_atomic_replaces_an_existing_file_whole)
{
	char *dir, path[4200], got[64], listing[256];
	int dfd;

	REQUIRE(temp_dir("kx-atomic", &dir, &dfd));
	CHECK_INT_EQ(kx_write_atomic(dfd, "f", "a long first content", 20, 0600, 0), 0);
	CHECK_INT_EQ(kx_write_atomic(dfd, "f", "short", 5, 0600, 0), 0);
	snprintf(path, sizeof path, "%s/f", dir);
	CHECK_INT_EQ(read_path(path, got, sizeof got), 5);
	CHECK_STR_EQ(got, "short");
	list_dir(dir, listing, sizeof listing);
	CHECK_STR_EQ(listing, "f");
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

TEST(write_atomic_takes_a_path_with_directories)
{
	char *dir, path[4200], got[64], listing[256];

	dir = test_mkdtemp("kx-atomic");
	REQUIRE(dir != NULL);
	snprintf(path, sizeof path, "%s/sub", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(path, sizeof path, "%s/sub/rec", dir);
	CHECK_INT_EQ(kx_write_atomic(AT_FDCWD, path, "line\n", 5, 0600, KX_DURABLE), 0);
	CHECK_INT_EQ(read_path(path, got, sizeof got), 5);
	CHECK_STR_EQ(got, "line\n");
	snprintf(path, sizeof path, "%s/sub", dir);
	list_dir(path, listing, sizeof listing);
	CHECK_STR_EQ(listing, "rec");
	test_rm_rf(dir);
	free(dir);
}

/* ---- directories ---- */

TEST(shell_word_quotes_what_a_shell_would_split_or_expand)
{
	char out[64];
	CHECK_STR_EQ(kx_shell_word("/tmp/a-b_c.d/e,f:g@h%i+j=k", out, sizeof out),
	             "/tmp/a-b_c.d/e,f:g@h%i+j=k");
	CHECK_STR_EQ(kx_shell_word("/tmp/d\xc3\xa9j\xc3\xa0", out, sizeof out),
	             "/tmp/d\xc3\xa9j\xc3\xa0"); /* déjà: UTF-8 as it is */
	CHECK_STR_EQ(kx_shell_word("/tmp/with space", out, sizeof out), "'/tmp/with space'");
	CHECK_STR_EQ(kx_shell_word("/tmp/it's $HOME", out, sizeof out), "'/tmp/it'\\''s $HOME'");
	CHECK_STR_EQ(kx_shell_word("", out, sizeof out), "''");
	CHECK_STR_EQ(kx_shell_word("a*b", out, sizeof out), "'a*b'");
	/* cut, it is still closed: a word too long for OUT ends in its quote */
	CHECK_STR_EQ(kx_shell_word("a b c d e f g h", out, 8), "'a b c'");
}

TEST(private_dir_accepts_0700_and_says_how_to_fix_anything_else)
{
	char *dir, why[8192], want[8192];

	dir = test_mkdtemp("kx-private");
	REQUIRE(dir != NULL);
	REQUIRE(chmod(dir, 0700) == 0);
	CHECK_INT_EQ(kx_private_dir(dir, why, sizeof why), 0);
	REQUIRE(chmod(dir, 0750) == 0);
	CHECK_INT_EQ(kx_private_dir(dir, why, sizeof why), 1);
	snprintf(want, sizeof want,
	         "directory %s is accessible to others (mode 0750, need 0700%s): chmod 700 %s", dir,
	         geteuid() == 0 ? " or 0710" : "", dir);
	CHECK_STR_EQ(why, want);
	REQUIRE(chmod(dir, 0700) == 0);
	test_rm_rf(dir);
	errno = 0;
	CHECK_INT_EQ(kx_private_dir(dir, why, sizeof why), -1);
	CHECK_INT_EQ(errno, ENOENT);
	free(dir);
}

TEST(empty_dir_removes_everything_inside_and_keeps_the_dir)
{
	char *dir, path[4200], listing[256];

	dir = test_mkdtemp("kx-empty");
	REQUIRE(dir != NULL);
	snprintf(path, sizeof path, "%s/a", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(path, sizeof path, "%s/a/b", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(path, sizeof path, "%s/a/b/g", dir);
	REQUIRE(kx_write_atomic(AT_FDCWD, path, "x", 1, 0600, 0) == 0);
	snprintf(path, sizeof path, "%s/a/b", dir);
	REQUIRE(chmod(path, 0500) == 0); /* read-only: made writable to empty it */
	snprintf(path, sizeof path, "%s/f", dir);
	REQUIRE(kx_write_atomic(AT_FDCWD, path, "x", 1, 0600, 0) == 0);
	CHECK_INT_EQ(kx_empty_dir(dir), 0);
	list_dir(dir, listing, sizeof listing);
	CHECK_STR_EQ(listing, "");
	test_rm_rf(dir);
	CHECK_INT_EQ(kx_empty_dir(dir), 0); /* gone already: nothing to do */
	free(dir);
}

/* kx_walk's visit for the test below: count entries, never a link's target. */
static void count_entry(int dirfd, const char *name, const struct stat *st, void *arg)
{
	(void)dirfd;
	(void)name;
	((int *)arg)[S_ISLNK(st->st_mode) ? 1 : 0]++;
}

TEST(walk_visits_max_depth_levels_down_and_says_when_it_left_some_out)
{
	char *dir, path[4200];
	int fd, n[2];

	dir = test_mkdtemp("kx-walk");
	REQUIRE(dir != NULL);
	snprintf(path, sizeof path, "%s/a", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(path, sizeof path, "%s/a/b", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(path, sizeof path, "%s/a/b/c", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(path, sizeof path, "%s/a/l", dir);
	REQUIRE(symlink("/", path) == 0);
	REQUIRE((fd = open(dir, O_PATH | O_DIRECTORY)) >= 0);
	memset(n, 0, sizeof n);
	CHECK(!kx_walk(fd, 3, count_entry, n)); /* a (level 0), b and l (1), c (2) */
	CHECK_INT_EQ(n[0], 3);
	CHECK_INT_EQ(n[1], 1);
	memset(n, 0, sizeof n);
	CHECK(kx_walk(fd, 2, count_entry, n)); /* c seen, not entered: it is empty, */
	CHECK_INT_EQ(n[0], 3);                 /* but kx_walk cannot know that */
	memset(n, 0, sizeof n);
	CHECK(kx_walk(fd, 0, count_entry, n)); /* a only */
	CHECK_INT_EQ(n[0], 1);
	CHECK_INT_EQ(n[1], 0);
	close(fd);
	test_rm_rf(dir);
	free(dir);
}

TEST(unix_path_goes_through_proc_when_the_dir_is_too_long)
{
	char dir[300], buf[108];
	int dfd = -1;

	CHECK_INT_EQ(kx_unix_path(buf, sizeof buf, "/tmp", "control.sock", &dfd), 0);
	CHECK_STR_EQ(buf, "/tmp/control.sock");
	CHECK_INT_EQ(dfd, -1);
	memset(dir, 'd', sizeof dir);
	memcpy(dir, "/tmp/", 5);
	dir[sizeof dir - 1] = '\0';
	CHECK_INT_EQ(kx_unix_path(buf, sizeof buf, dir, "control.sock", &dfd), -1);
	CHECK_INT_EQ(dfd, -1); /* DIR cannot be opened: left < 0 */
	CHECK_INT_EQ(kx_unix_path(buf, sizeof buf, dir, "control.sock", &(int){0}), 0);
	CHECK_STR_EQ(buf, "/proc/self/fd/0/control.sock"); /* a descriptor given */
}

/* What was planted at the name is replaced: the FIFO is never opened (the
 * write would wait for a reader for ever), the link never followed. */
TEST(write_atomic_replaces_a_fifo_or_a_symlink_at_the_name_without_following_it)
{
	char *dir, path[4200], target[4200], got[64];
	struct stat st;
	int dfd;

	REQUIRE(temp_dir("kx-atomic", &dir, &dfd));
	snprintf(path, sizeof path, "%s/fifo", dir);
	REQUIRE(mkfifo(path, 0600) == 0);
	CHECK_INT_EQ(kx_write_atomic(dfd, "fifo", "data", 4, 0600, 0), 0);
	CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
	CHECK_INT_EQ(read_path(path, got, sizeof got), 4);
	CHECK_STR_EQ(got, "data");

	snprintf(target, sizeof target, "%s/secret", dir);
	REQUIRE(kx_write_atomic(dfd, "secret", "keep me", 7, 0600, 0) == 0);
	snprintf(path, sizeof path, "%s/link", dir);
	REQUIRE(symlink(target, path) == 0);
	CHECK_INT_EQ(kx_write_atomic(dfd, "link", "new", 3, 0600, KX_DURABLE), 0);
	CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode)); /* the link itself replaced */
	CHECK_INT_EQ(read_path(path, got, sizeof got), 3);
	CHECK_STR_EQ(got, "new");
	CHECK_INT_EQ(read_path(target, got, sizeof got), 7);
	CHECK_STR_EQ(got, "keep me"); /* and not written through */
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

/* A write that fails half-way (here: over RLIMIT_FSIZE, as a full disk
 * would) leaves the old file as it was and no temporary file. */
TEST(write_atomic_that_fails_leaves_the_old_file_and_no_temp)
{
	char *dir, path[4200], got[64], listing[256];
	struct rlimit old, small = {4, 4};
	void (*old_xfsz)(int);
	int dfd, rc, e;

	REQUIRE(temp_dir("kx-atomic", &dir, &dfd));
	REQUIRE(kx_write_atomic(dfd, "f", "old", 3, 0600, 0) == 0);
	REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
	small.rlim_max = old.rlim_max; /* so that it can be restored, unprivileged too */
	old_xfsz = signal(SIGXFSZ, SIG_IGN);
	REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
	errno = 0;
	rc = kx_write_atomic(dfd, "f", "new content", 11, 0600, KX_DURABLE);
	e = errno;
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, old_xfsz);
	CHECK_INT_EQ(rc, -1);
	CHECK_INT_EQ(e, EFBIG);
	snprintf(path, sizeof path, "%s/f", dir);
	CHECK_INT_EQ(read_path(path, got, sizeof got), 3);
	CHECK_STR_EQ(got, "old");
	list_dir(dir, listing, sizeof listing);
	CHECK_STR_EQ(listing, "f");
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

TEST(write_atomic_over_a_directory_fails_and_leaves_it)
{
	char *dir, path[4200], listing[256];
	int dfd;

	REQUIRE(temp_dir("kx-atomic", &dir, &dfd));
	snprintf(path, sizeof path, "%s/d", dir);
	REQUIRE(mkdir(path, 0700) == 0);
	errno = 0;
	CHECK_INT_EQ(kx_write_atomic(dfd, "d", "x", 1, 0600, 0), -1);
	CHECK_INT_EQ(errno, EISDIR);
	errno = 0;
	CHECK_INT_EQ(kx_write_atomic(dfd, "d/", "x", 1, 0600, 0), -1); /* no file name */
	CHECK_INT_EQ(errno, EISDIR);
	errno = 0;
	CHECK_INT_EQ(kx_write_atomic(dfd, "missing/f", "x", 1, 0600, 0), -1);
	CHECK_INT_EQ(errno, ENOENT);
	list_dir(dir, listing, sizeof listing);
	CHECK_STR_EQ(listing, "d");
	list_dir(path, listing, sizeof listing);
	CHECK_STR_EQ(listing, "");
	close(dfd);
	test_rm_rf(dir);
	free(dir);
}

/* ---- growing arrays, closing, first lines ---- */

TEST(grow_keeps_the_array_while_there_is_room_then_doubles_from_4)
{
	size_t cap = 0, n;
	int *v = NULL, *nv;

	nv = kx_grow(v, &cap, 0, sizeof *v);
	CHECK(nv != NULL);
	CHECK_INT_EQ((long)cap, 4);
	v = nv;
	for (n = 0; n < 4; n++) {
		CHECK(kx_grow(v, &cap, n, sizeof *v) == v);
		v[n] = (int)n;
	}
	CHECK_INT_EQ((long)cap, 4);
	nv = kx_grow(v, &cap, 4, sizeof *v);
	CHECK(nv != NULL);
	CHECK_INT_EQ((long)cap, 8);
	v = nv;
	for (n = 0; n < 4; n++)
		CHECK_INT_EQ(v[n], (long)n);
	free(v);
}

TEST(grow_past_size_max_fails_and_leaves_the_array_and_its_cap)
{
	size_t cap = 4;
	char *v = malloc(4);

	CHECK(v != NULL);
	CHECK(kx_grow(v, &cap, 4, SIZE_MAX / 4) == NULL);
	CHECK_INT_EQ((long)cap, 4);
	free(v);
}

TEST(close_closes_an_open_fd_sets_minus_1_and_keeps_errno)
{
	int fds[2], fd;

	CHECK_INT_EQ(pipe(fds), 0);
	fd = fds[0];
	errno = ENOSPC;
	kx_close(&fds[0]);
	CHECK_INT_EQ(fds[0], -1);
	CHECK_INT_EQ(errno, ENOSPC);
	CHECK_INT_EQ(fcntl(fd, F_GETFD), -1);
	kx_close(&fds[0]); /* a closed one is left alone */
	CHECK_INT_EQ(fds[0], -1);
	kx_close_all(fds, 2);
	CHECK_INT_EQ(fds[1], -1);
}

/* A temporary stream holding TEXT, read from its start (NULL: none). */
static FILE *stream_of(const char *text)
{
	FILE *f = tmpfile();

	if (f) {
		fputs(text, f);
		rewind(f);
	}
	return f;
}

TEST(first_line_is_the_line_without_its_newline_and_empty_for_nothing)
{
	char buf[8];
	FILE *f = stream_of("one\ntwo\n");

	CHECK(f != NULL);
	kx_first_line(f, buf, sizeof buf);
	CHECK_STR_EQ(buf, "one");
	kx_first_line(f, buf, sizeof buf);
	CHECK_STR_EQ(buf, "two");
	kx_first_line(f, buf, sizeof buf);
	CHECK_STR_EQ(buf, "");
	fclose(f);
	strcpy(buf, "old");
	kx_first_line(NULL, buf, sizeof buf);
	CHECK_STR_EQ(buf, "");
	/* longer than the buffer: cut to it */
	f = stream_of("abcdefg\n");
	CHECK(f != NULL);
	kx_first_line(f, buf, 4);
	CHECK_STR_EQ(buf, "abc");
	fclose(f);
}

/* ---- base64 ---- */

/* kx_base64_encode of the LEN bytes at IN must give exactly WANT. */
static void check_b64(const char *in, size_t len, const char *want)
{
	size_t n = 12345;
	char *out = kx_base64_encode(in, len, &n);

	CHECK_STR_EQ(out, want);
	CHECK_INT_EQ(n, strlen(want));
	free(out);
}

#define B64(in, want) check_b64(in, sizeof in - 1, want)

/* In a child whose stdin and stdout are closed: both are opened again (the
 * mask says which), and reading stdin or writing stdout still fails with
 * EBADF; a second call finds all three open. */
TEST(std_fds_open_fills_closed_ones_with_dev_null_that_fails_as_closed)
{
	pid_t pid;
	int st = -1;
	fflush(NULL);
	if ((pid = fork()) == 0) {
		char c;
		close(0);
		close(1);
		if (kx_std_fds_open() != 3)
			_exit(1);
		if (fcntl(0, F_GETFD) < 0 || fcntl(1, F_GETFD) < 0)
			_exit(2);
		if (write(1, "x", 1) != -1 || errno != EBADF)
			_exit(3);
		if (read(0, &c, 1) != -1 || errno != EBADF)
			_exit(4);
		_exit(kx_std_fds_open() == 0 ? 0 : 5);
	}
	CHECK(pid > 0);
	CHECK_INT_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_INT_EQ(WEXITSTATUS(st), 0);
}

/* A child that would wait for ever is killed and reaped: nothing is left
 * to wait for, not even a zombie. */
TEST(kill_wait_kills_and_reaps_the_child)
{
	pid_t pid;
	fflush(NULL);
	if ((pid = fork()) == 0) {
		for (;;)
			pause();
	}
	REQUIRE(pid > 0);
	kx_kill_wait(pid);
	errno = 0;
	CHECK_INT_EQ(waitpid(pid, NULL, WNOHANG), -1);
	CHECK_INT_EQ(errno, ECHILD);
}

/* A process's start time names it while it runs; once it has ended,
 * reaped or not (a zombie), there is none. */
TEST(start_time_names_a_running_process_and_no_ended_one)
{
	long long self = kx_proc_start_time(getpid()), child;
	pid_t pid;
	CHECK(self > 0);
	CHECK_INT_EQ(kx_proc_start_time(getpid()), self);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		for (;;)
			pause();
	}
	REQUIRE(pid > 0);
	child = kx_proc_start_time(pid);
	CHECK(child >= self);
	kill(pid, SIGKILL);
	/* a zombie until reaped: polled (at most 10 s) until its
	 * /proc/PID/stat says state Z */
	for (int i = 0; i < 10000; i++) {
		char path[64], buf[256] = "";
		FILE *f;
		snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
		if ((f = fopen(path, "r"))) {
			if (!fgets(buf, sizeof buf, f))
				buf[0] = '\0';
			fclose(f);
		}
		if (strstr(buf, ") Z "))
			break;
		usleep(1000);
	}
	CHECK_INT_EQ(kx_proc_start_time(pid), -1);
	CHECK(waitpid(pid, NULL, 0) == pid);
	CHECK_INT_EQ(kx_proc_start_time(pid), -1);
	CHECK_INT_EQ(kx_proc_start_time(0), -1);
}

/* kx_json_lone_surrogates of IN: OUT, N replaced */
#define LONE(in, out, n)                                                     \
	do {                                                                 \
		char t_[] = in;                                              \
		CHECK_INT_EQ(kx_json_lone_surrogates(t_, sizeof t_ - 1), n); \
		CHECK_STR_EQ(t_, out);                                       \
	} while (0)

TEST(json_lone_surrogates_become_fffd_and_nothing_else_changes)
{
	LONE("\"\\ud800\"", "\"\\ufffd\"", 1);               /* a high one alone */
	LONE("\"\\udcff x\"", "\"\\ufffd x\"", 1);           /* a low one alone */
	LONE("\"\\uD83D\\uDE00\"", "\"\\uD83D\\uDE00\"", 0); /* a pair */
	LONE("\"\\ud800\\u0041\"", "\"\\ufffd\\u0041\"", 1); /* high, then no low */
	LONE("\"\\\\ud800\"", "\"\\\\ud800\"", 0);           /* an escaped backslash, then text */
	LONE("\\ud800", "\\ud800", 0);                       /* outside a string */
	LONE("\"\\\"\\ud800\"", "\"\\\"\\ufffd\"", 1);       /* after an escaped quote */
	LONE("\"\\ud8", "\"\\ud8", 0);                       /* cut short */
}

TEST(base64_encodes_the_rfc_4648_vectors)
{
	B64("", "");
	B64("f", "Zg==");
	B64("fo", "Zm8=");
	B64("foo", "Zm9v");
	B64("foob", "Zm9vYg==");
	B64("fooba", "Zm9vYmE=");
	B64("foobar", "Zm9vYmFy");
}

TEST(base64_encodes_every_byte_value_with_the_standard_alphabet)
{
	char *out;

	B64("\x00", "AA==");
	B64("\xff\xff\xff", "////");
	B64("\xfb\xef\xbe", "++++");
	B64("\x89PNG\r\n\x1a\n", "iVBORw0KGgo=");
	out = kx_base64_encode("\xff", 1, NULL); /* OUT_LEN may be NULL */
	CHECK_STR_EQ(out, "/w==");
	free(out);
}

/* kx_base64_decode of TEXT gives the LEN bytes WANT (LEN -1: refused). */
static void check_unb64(const char *text, const char *want, long len)
{
	unsigned char out[64];
	size_t n = 999;
	int rc = kx_base64_decode(text, strlen(text), out, &n);
	if (len < 0) {
		CHECK_INT_EQ(rc, -1);
		return;
	}
	CHECK_INT_EQ(rc, 0);
	CHECK_INT_EQ(n, (size_t)len);
	CHECK(memcmp(out, want, (size_t)len) == 0);
}

TEST(base64_decodes_what_it_encodes_and_refuses_what_is_not_base64)
{
	unsigned char all[256], back[256 + 3];
	size_t n = 0;
	char *text;

	check_unb64("", "", 0);
	check_unb64("Zg==", "f", 1);
	check_unb64("Zg", "f", 1); /* padding optional */
	check_unb64("Zm8=", "fo", 2);
	check_unb64("Zm9vYmFy", "foobar", 6);
	check_unb64("Zm9v\nYmFy\n", "foobar", 6); /* MIME's lines */
	check_unb64("iVBORw0KGgo=", "\x89PNG\r\n\x1a\n", 8);
	check_unb64("Zm9v!", NULL, -1);    /* not the alphabet */
	check_unb64("Zg==Zg==", NULL, -1); /* data after the padding */
	check_unb64("Zh==", NULL, -1);     /* bits left that are not zero */
	check_unb64("Z", NULL, -1);        /* 6 bits: no byte */
	check_unb64("Zm9=", NULL, -1);     /* "Zm9" decodes with 2 bits set */
	check_unb64("Zg=", NULL, -1);      /* padding of the wrong length */
	check_unb64("Zm8==", NULL, -1);
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	REQUIRE((text = kx_base64_encode(all, sizeof all, NULL)) != NULL);
	CHECK_INT_EQ(kx_base64_decode(text, strlen(text), back, &n), 0);
	CHECK_INT_EQ(n, sizeof all);
	CHECK(memcmp(all, back, sizeof all) == 0);
	free(text);
}

/* ---- SHA-256 and HMAC-SHA-256 ---- */

/* OUT[0..32) in lower-case hex, into HEX (65 bytes). */
static void to_hex(const unsigned char *out, char *hex)
{
	for (int i = 0; i < KX_SHA256_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
}

/* The SHA-256 of DATA[0..LEN), fed in pieces of STEP bytes, is WANT. */
static void check_sha(const void *data, size_t len, size_t step, const char *want)
{
	kx_sha256_t c;
	unsigned char out[KX_SHA256_LEN];
	char hex[65];
	kx_sha256_init(&c);
	for (size_t at = 0; at < len; at += step)
		kx_sha256_update(&c, (const char *)data + at, len - at < step ? len - at : step);
	kx_sha256_final(&c, out);
	to_hex(out, hex);
	CHECK_STR_EQ(hex, want);
}

/* HMAC-SHA-256 under KEY of DATA is WANT (RFC 4231 gives some cut to
 * their first WANT_HEX hex digits). */
static void check_hmac(const void *key, size_t key_len, const void *data, size_t len,
                       const char *want)
{
	kx_hmac_sha256_t m;
	unsigned char out[KX_SHA256_LEN];
	char hex[65];
	kx_hmac_sha256_init(&m, key, key_len);
	kx_hmac_sha256_update(&m, data, len);
	kx_hmac_sha256_final(&m, out);
	to_hex(out, hex);
	hex[strlen(want)] = '\0';
	CHECK_STR_EQ(hex, want);
}

/* FIPS 180-4's examples (NIST's "SHA256.pdf"), whole and fed in pieces
 * that cross the 64-byte blocks, and the lengths either side of the
 * padding's boundary (55, 56, 64 bytes: sha256sum's digests). */
TEST(sha256_gives_the_fips_180_4_digests_however_it_is_fed)
{
	static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char *million = malloc(1000000);
	REQUIRE(million);
	memset(million, 'a', 1000000);
	check_sha("abc", 3, 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check_sha("", 0, 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	for (size_t step = 1; step <= 64; step *= 4)
		check_sha(two, sizeof two - 1, step,
		          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	check_sha(million, 1000000, 4096,
	          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	check_sha(million, 1000000, 999,
	          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	check_sha(million, 55, 55,
	          "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
	check_sha(million, 56, 56,
	          "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
	check_sha(million, 64, 7,
	          "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
	free(million);
}

/* RFC 4231's test cases 1 to 7: short, long (hashed first) and 131-byte
 * keys; case 5 is cut to 128 bits, as the RFC gives it. */
TEST(hmac_sha256_gives_the_rfc_4231_values)
{
	unsigned char k20[20], k131[131], d50[50];
	memset(k20, 0x0b, sizeof k20);
	check_hmac(k20, 20, "Hi There", 8,
	           "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
	           "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	memset(k20, 0xaa, sizeof k20);
	memset(d50, 0xdd, sizeof d50);
	check_hmac(k20, 20, d50, 50,
	           "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
	{
		unsigned char k25[25];
		for (int i = 0; i < 25; i++)
			k25[i] = (unsigned char)(i + 1);
		memset(d50, 0xcd, sizeof d50);
		check_hmac(k25, 25, d50, 50,
		           "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
	}
	memset(k20, 0x0c, sizeof k20);
	check_hmac(k20, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b");
	memset(k131, 0xaa, sizeof k131);
	check_hmac(k131, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
	           "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	{
		static const char d7[] =
		        "This is a test using a larger than block-size key and a larger than "
		        "block-size data. The key needs to be hashed before being used by the "
		        "HMAC algorithm.";
		check_hmac(k131, 131, d7, sizeof d7 - 1,
		           "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
	}
}

TEST(equal_ct_tells_equal_from_unequal_at_any_place)
{
	unsigned char a[32] = {0}, b[32] = {0};
	CHECK(kx_equal_ct(a, b, sizeof a));
	CHECK(kx_equal_ct(a, b, 0));
	for (size_t i = 0; i < sizeof a; i++) {
		b[i] = 1;
		CHECK(!kx_equal_ct(a, b, sizeof a));
		b[i] = 0;
	}
}

/* ---- timestamps ---- */

TEST(iso8601_with_0_3_or_6_digits_rounds_to_the_last)
{
	char out[32];

	kx_iso8601(1780766465.123456, 0, out);
	CHECK_STR_EQ(out, "2026-06-06T17:21:05Z");
	kx_iso8601(1780766465.123456, 3, out);
	CHECK_STR_EQ(out, "2026-06-06T17:21:05.123Z");
	kx_iso8601(1780766465.123456, 6, out);
	CHECK_STR_EQ(out, "2026-06-06T17:21:05.123456Z");
	kx_iso8601(1780766465.9996, 3, out); /* to the nearest millisecond */
	CHECK_STR_EQ(out, "2026-06-06T17:21:06.000Z");
	kx_iso8601(0.5, 0, out);
	CHECK_STR_EQ(out, "1970-01-01T00:00:01Z");
	kx_iso8601(0.4, 0, out);
	CHECK_STR_EQ(out, "1970-01-01T00:00:00Z");
	kx_iso8601(-1.0, 0, out);
	CHECK_STR_EQ(out, "1969-12-31T23:59:59Z");
	kx_iso8601(253402300799.5, 6, out); /* the longest: 27 characters */
	CHECK_STR_EQ(out, "9999-12-31T23:59:59.500000Z");
	kx_iso8601(1780766465.000042, 6, out); /* leading zeros of the fraction */
	CHECK_STR_EQ(out, "2026-06-06T17:21:05.000042Z");
}

TEST(iso8601_digits_out_of_range_are_clamped)
{
	char out[32];

	kx_iso8601(1.25, 9, out);
	CHECK_STR_EQ(out, "1970-01-01T00:00:01.250000Z");
	kx_iso8601(1.25, -1, out);
	CHECK_STR_EQ(out, "1970-01-01T00:00:01Z");
}

/* The nearest directory of a path that exists, and its real path: the
 * path itself when it exists (through a link, resolved), else the longest
 * prefix that does; "/" when nothing resolves. */
TEST(realpath_nearest_is_the_longest_prefix_that_exists_resolved)
{
	char base[] = "/tmp/kx-near-XXXXXX", real[PATH_MAX], near[PATH_MAX], path[PATH_MAX],
	     link[PATH_MAX], want[PATH_MAX];

	REQUIRE(mkdtemp(base) != NULL);
	REQUIRE(realpath(base, want) != NULL);
	snprintf(path, sizeof path, "%s/a", base);
	REQUIRE(mkdir(path, 0700) == 0);
	snprintf(link, sizeof link, "%s/l", base);
	REQUIRE(symlink("a", link) == 0);

	kx_realpath_nearest(base, near, real);
	CHECK_STR_EQ(near, base);
	CHECK_STR_EQ(real, want);
	snprintf(path, sizeof path, "%s/l/x/y", base);
	kx_realpath_nearest(path, near, real);
	CHECK_STR_EQ(near, link);
	strcat(want, "/a");
	CHECK_STR_EQ(real, want);
	kx_realpath_nearest("no-such-relative/x", near, real);
	CHECK_STR_EQ(real, "/");

	snprintf(path, sizeof path, "rm -rf '%s'", base);
	CHECK(system(path) == 0);
}

/* kx_open_file: a regular file only, never through a link at its name,
 * never a wait on a FIFO's other end (ENXIO at once); _st says its size. */
TEST(open_file_takes_a_regular_file_and_refuses_fifos_and_links_at_once)
{
	char *dir = test_mkdtemp("openfile"), path[PATH_MAX];
	struct stat st;
	int fd;
	REQUIRE(dir != NULL);
	snprintf(path, sizeof path, "%s/f", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	REQUIRE(fd >= 0);
	CHECK_INT_EQ(write(fd, "abc", 3), 3);
	close(fd);
	snprintf(path, sizeof path, "%s/fifo", dir);
	REQUIRE(mkfifo(path, 0600) == 0);
	snprintf(path, sizeof path, "%s/l", dir);
	REQUIRE(symlink("f", path) == 0);

	snprintf(path, sizeof path, "%s/f", dir);
	fd = kx_open_file_st(AT_FDCWD, path, O_RDONLY, 0, &st);
	CHECK(fd >= 0);
	CHECK_INT_EQ((int)st.st_size, 3);
	CHECK_INT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof path, "%s/fifo", dir); /* (no reader: a wait, were it opened) */
	errno = 0;
	CHECK_INT_EQ(kx_open_file(AT_FDCWD, path, O_WRONLY, 0), -1);
	CHECK_INT_EQ(errno, ENXIO);
	errno = 0;
	CHECK_INT_EQ(kx_open_file(AT_FDCWD, path, O_RDONLY, 0), -1);
	CHECK_INT_EQ(errno, ENXIO);
	snprintf(path, sizeof path, "%s/l", dir);
	errno = 0;
	CHECK_INT_EQ(kx_open_file(AT_FDCWD, path, O_RDONLY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	fd = kx_open_file(AT_FDCWD, dir, O_RDONLY, 0); /* a directory */
	CHECK_INT_EQ(fd, -1);
	test_rm_rf(dir);
	free(dir);
}

/* DIR/NAME, in BUF (PATH_MAX). */
static const char *at(char *buf, const char *dir, const char *name)
{
	int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
	if (n < 0 || n >= PATH_MAX)
		buf[0] = '\0'; /* (then nothing is found there) */
	return buf;
}

TEST(below_the_guarded_directory_no_path_is_followed_through_a_link)
{
	char *tmp = test_mkdtemp("nolinks"), dir[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	DIR *d;
	int fd;
	REQUIRE(tmp && realpath(tmp, dir));
	/* home/sessions/f and other/sessions/f; homex -> other (a name that
	 * begins as home's does, not below it) */
	REQUIRE(mkdir(at(p, dir, "home"), 0700) == 0 && mkdir(at(p, dir, "other"), 0700) == 0);
	REQUIRE(mkdir(at(p, dir, "home/sessions"), 0700) == 0);
	REQUIRE(mkdir(at(p, dir, "other/sessions"), 0700) == 0);
	REQUIRE((fd = open(at(p, dir, "home/sessions/f"), O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	REQUIRE((fd = open(at(p, dir, "other/sessions/f"), O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	REQUIRE(symlink(at(q, dir, "other"), at(p, dir, "homex")) == 0);

	REQUIRE(kx_no_links_below(at(q, dir, "home/")) == 0);
	fd = kx_open_path(AT_FDCWD, at(p, dir, "home/sessions/f"), O_RDONLY, 0);
	CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
	if (fd >= 0)
		close(fd);
	/* home swapped for a link to other, as code that can write DIR could */
	REQUIRE(rename(at(p, dir, "home"), at(q, dir, "home.real")) == 0);
	REQUIRE(symlink(at(q, dir, "other"), at(p, dir, "home")) == 0);
	errno = 0;
	CHECK_INT_EQ(kx_open_path(AT_FDCWD, at(p, dir, "home/sessions/f"), O_RDONLY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	errno = 0;
	CHECK_INT_EQ(kx_open_file(AT_FDCWD, at(p, dir, "home/sessions/f"), O_RDONLY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	errno = 0;
	CHECK_INT_EQ(kx_open_path(AT_FDCWD, at(p, dir, "home"), O_PATH | O_DIRECTORY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	errno = 0;
	d = kx_opendir(at(p, dir, "home/sessions"));
	CHECK(d == NULL && errno == ELOOP);
	if (d)
		closedir(d);
	errno = 0;
	CHECK_INT_EQ(kx_write_atomic(AT_FDCWD, at(p, dir, "home/sessions/g"), "x", 1, 0600, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	CHECK(access(at(p, dir, "other/sessions/g"), F_OK) < 0); /* nothing written there */
	/* a link elsewhere is followed as ever */
	fd = kx_open_path(AT_FDCWD, at(p, dir, "homex/sessions/f"), O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	d = kx_opendir(at(p, dir, "homex/sessions"));
	CHECK(d != NULL);
	if (d)
		closedir(d);
	/* and, the guard ended, below it too */
	REQUIRE(kx_no_links_below(NULL) == 0);
	fd = kx_open_path(AT_FDCWD, at(p, dir, "home/sessions/f"), O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	test_rm_rf(tmp);
	free(tmp);
}

TEST(open_walk_follows_no_link_in_any_part)
{
	char *tmp = test_mkdtemp("walk"), dir[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	int fd, dfd;
	REQUIRE(tmp && realpath(tmp, dir));
	REQUIRE(mkdir(at(p, dir, "a"), 0700) == 0 && mkdir(at(p, dir, "a/b"), 0700) == 0);
	REQUIRE((fd = open(at(p, dir, "a/b/f"), O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	REQUIRE(symlink(at(q, dir, "a"), at(p, dir, "l")) == 0);
	REQUIRE(symlink("f", at(p, dir, "a/b/lf")) == 0);

	fd = kx_open_walk(AT_FDCWD, at(p, dir, "a/b/f"), O_RDONLY, 0);
	CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC));
	if (fd >= 0)
		close(fd);
	errno = 0;
	CHECK_INT_EQ(kx_open_walk(AT_FDCWD, at(p, dir, "l/b/f"), O_RDONLY, 0), -1); /* above */
	CHECK(errno == ELOOP || errno == ENOTDIR);
	errno = 0;
	CHECK_INT_EQ(kx_open_walk(AT_FDCWD, at(p, dir, "a/b/lf"), O_RDONLY, 0), -1); /* at it */
	CHECK_INT_EQ(errno, ELOOP);
	REQUIRE((dfd = open(at(p, dir, "a"), O_PATH | O_DIRECTORY)) >= 0);
	fd = kx_open_walk(dfd, "b/f", O_RDONLY, 0); /* relative to a descriptor */
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	fd = kx_open_no_links(dfd, "b/f", O_RDONLY, 0);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	errno = 0;
	CHECK_INT_EQ(kx_open_no_links(AT_FDCWD, at(p, dir, "l/b/f"), O_RDONLY, 0), -1);
	CHECK_INT_EQ(errno, ELOOP);
	close(dfd);
	test_rm_rf(tmp);
	free(tmp);
}

int main(void)
{
	RUN(now_ms_never_goes_back);
	RUN(wall_s_is_the_time_of_day);

	RUN(fmt_ms_says_whole_seconds_tenths_or_milliseconds);
	RUN(fmt_ms_is_cut_to_its_buffer);
	RUN(fmt_bytes_says_bytes_below_one_kib);
	RUN(fmt_bytes_says_whole_units_when_exact);
	RUN(fmt_bytes_says_one_decimal_otherwise);
	RUN(fmt_bytes_never_says_1024_of_a_unit);
	RUN(fmt_bytes_of_a_negative_size_is_a_dash);
	RUN(msgf_that_fits_is_the_whole_message);
	RUN(msgf_that_is_cut_ends_in_dots);
	RUN(msgf_cuts_between_characters);
	RUN(msgf_into_a_tiny_buffer_cuts_without_the_mark);
	RUN(fmt_middle_keeps_a_short_path_whole);
	RUN(fmt_middle_shows_a_long_path_by_its_ends);
	RUN(fmt_middle_cuts_between_characters);

	RUN(utf8_valid_accepts_every_well_formed_length);
	RUN(utf8_valid_refuses_cut_overlong_surrogate_and_stray_bytes);
	RUN(utf8_valid_str_checks_a_c_string_and_refuses_null);
	RUN(utf8_repair_copies_valid_text_byte_for_byte);
	RUN(utf8_repair_replaces_each_maximal_ill_formed_subpart_as_python);
	RUN(utf8_repair_accepts_a_null_out_len);
	RUN(utf8_floor_keeps_whole_characters_of_every_length);
	RUN(utf8_floor_drops_a_character_that_the_end_cut_short);
	RUN(utf8_floor_cuts_ill_formed_text_between_subparts);
	RUN(utf8_count_counts_code_points);
	RUN(utf8_count_counts_each_ill_formed_subpart_once_as_repair_makes_it);
	RUN(utf8_blank_measures_spaces_of_every_width_and_nothing_else);
	RUN(name_escape_shows_invisible_format_characters_as_u_escapes);
	RUN(name_escape_shows_controls_bad_bytes_and_backslashes_escaped);
	RUN(name_escape_keeps_ordinary_utf8);
	RUN(name_escape_stops_before_an_escape_that_does_not_fit);

	RUN(buf_appends_bytes_strings_and_formats_in_order);
	RUN(buf_appendf_longer_than_the_spare_room_comes_whole);
	RUN(buf_take_of_nothing_is_an_empty_string);
	RUN(buf_take_leaves_it_empty_for_reuse);
	RUN(buf_that_failed_refuses_appends_and_take_gives_null);
	RUN(buf_growth_is_bounded_past_the_prealloc_size);

	RUN(kernel_text_quotes_a_line_that_reads_as_kboxs_after_unseen_characters);
	RUN(kernel_text_of_2_mib_of_short_lines_is_kept_and_its_last_forged_line_quoted);
	RUN(live_text_quotes_a_line_that_reads_as_kboxs_and_no_other);
	RUN(live_text_holds_a_line_start_until_it_can_be_told);
	RUN(live_text_quotes_what_may_draw_a_line_of_kboxs_over_another);

	RUN(argv_add_copies_every_string_up_to_the_null);
	RUN(argv_addf_formats_one_argument_of_any_length);
	RUN(argv_take_of_nothing_is_an_empty_argv);
	RUN(argv_that_failed_refuses_adds_and_take_gives_null);
	RUN(argv_reset_empties_it);

	RUN(write_all_writes_every_byte_or_fails_with_errno);
	RUN(pread_full_reads_all_it_is_asked_but_past_the_end);
	RUN(temp_open_makes_a_new_file_named_prefix_and_64_random_bits);
	RUN(temp_open_refuses_a_name_longer_than_its_buffer);
	RUN(write_atomic_gives_the_content_and_the_mode_exactly_and_leaves_no_temp);
	RUN(write_atomic_replaces_an_existing_file_whole);
	RUN(write_atomic_takes_a_path_with_directories);
	RUN(write_atomic_replaces_a_fifo_or_a_symlink_at_the_name_without_following_it);
	RUN(write_atomic_that_fails_leaves_the_old_file_and_no_temp);
	RUN(write_atomic_over_a_directory_fails_and_leaves_it);

	RUN(shell_word_quotes_what_a_shell_would_split_or_expand);
	RUN(private_dir_accepts_0700_and_says_how_to_fix_anything_else);
	RUN(empty_dir_removes_everything_inside_and_keeps_the_dir);
	RUN(walk_visits_max_depth_levels_down_and_says_when_it_left_some_out);
	RUN(unix_path_goes_through_proc_when_the_dir_is_too_long);

	RUN(grow_keeps_the_array_while_there_is_room_then_doubles_from_4);
	RUN(grow_past_size_max_fails_and_leaves_the_array_and_its_cap);
	RUN(close_closes_an_open_fd_sets_minus_1_and_keeps_errno);
	RUN(first_line_is_the_line_without_its_newline_and_empty_for_nothing);

	RUN(std_fds_open_fills_closed_ones_with_dev_null_that_fails_as_closed);
	RUN(kill_wait_kills_and_reaps_the_child);
	RUN(start_time_names_a_running_process_and_no_ended_one);

	RUN(json_lone_surrogates_become_fffd_and_nothing_else_changes);
	RUN(base64_encodes_the_rfc_4648_vectors);
	RUN(base64_encodes_every_byte_value_with_the_standard_alphabet);
	RUN(base64_decodes_what_it_encodes_and_refuses_what_is_not_base64);

	RUN(sha256_gives_the_fips_180_4_digests_however_it_is_fed);
	RUN(hmac_sha256_gives_the_rfc_4231_values);
	RUN(equal_ct_tells_equal_from_unequal_at_any_place);

	RUN(iso8601_with_0_3_or_6_digits_rounds_to_the_last);
	RUN(iso8601_digits_out_of_range_are_clamped);
	RUN(realpath_nearest_is_the_longest_prefix_that_exists_resolved);
	RUN(open_file_takes_a_regular_file_and_refuses_fifos_and_links_at_once);
	RUN(below_the_guarded_directory_no_path_is_followed_through_a_link);
	RUN(open_walk_follows_no_link_in_any_part);
	return tap_done();
}
