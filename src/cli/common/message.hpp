// cli/common/message.hpp — the words of `admit`'s messages: exit statuses, the usage_error they travel in, and how a
// value is quoted in them.
//
//   throw usage_error("invalid --window " + quote(text) + ": too large (max 1000000000s, about 31 years)");
//
// quote() shows the whole value (a file name is never cut, however long); quote_excerpt() bounds what comes from a
// file's content (a trace line may be megabytes of junk). Both escape what a terminal would not show as itself.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace admit::cli {

// Exit statuses of `admit`.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;       // an unexpected failure (out of memory, a write error)
inline constexpr int exit_bad_input = 2;     // bad option, bad trace, unreadable file
inline constexpr int exit_no_input = 66;     // sysexits' EX_NOINPUT: what was to be read exists but cannot be read
inline constexpr int exit_unavailable = 69;  // sysexits' EX_UNAVAILABLE: a service or a program it needs is not there
inline constexpr int exit_tempfail = 75;     // sysexits' EX_TEMPFAIL: may pass by waiting (Redis away, a lock held)

// Bad input to the command: the message names the option or file and the offending value.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` in double quotes, whole: '"' and '\' are escaped with a backslash, control bytes (and DEL) and bytes that
// are not part of valid UTF-8 are written as \xHH; valid UTF-8 (an accented file name) is kept as it is, except the
// characters a terminal would act on instead of showing — the C1 controls U+0080..U+009F (U+009B starts an escape
// sequence) and the bidirectional overrides and isolates U+202A..U+202E, U+2066..U+2069 — written as their code
// point in lowercase hex, \u{9b}, \u{202e}.
// Thread safety: a pure function.
[[nodiscard]] std::string quote(std::string_view text);

// `text` itself when a terminal shows every byte of it as itself (no control byte, DEL, invalid UTF-8 or character
// that quote() escapes for the terminal's sake), else quote(text): for a line that is already written to be read, as
// shell_words' (`admit inspect` shows `sh -c 'it'\''s'`, where quote() would double its backslash). Thread safety: a
// pure function.
[[nodiscard]] std::string as_shown(std::string_view text);

// `argv` as one line a POSIX shell would split back into the same words: a word of only letters, digits and
// `@%+=:,./_-` as it is; any other (a space, a quote, `$`, an empty word, a first word with `=`, which would read as
// an assignment) in single quotes, a `'` inside written `'\''`. For showing which command runs (`admit inspect`), where
// `echo 'a b'` must not read as `echo a b`. Thread safety: a pure function.
[[nodiscard]] std::string shell_words(const std::vector<std::string>& argv);

// The same, cut to at most `max_chars` bytes of `text` (at a character boundary) and marked with "..." when longer:
// for text read from a file, whose size the user does not control.
inline constexpr std::size_t excerpt_chars = 60;
[[nodiscard]] std::string quote_excerpt(std::string_view text, std::size_t max_chars = excerpt_chars);

// `text` wrapped to lines of at most `width` columns, breaking at spaces: the first line starts after `first_indent`
// columns (the caller has written them), the others with `indent` spaces. A '\n' in `text` starts a new line; a word
// longer than a line is broken after a '|' where it can be ("a|b|c"), else put alone on its line, whole. Columns are
// counted in UTF-8 characters. The result ends without a newline.
[[nodiscard]] std::string wrap_text(std::string_view text, std::size_t width, std::size_t first_indent,
                                    std::size_t indent);

// A library's message without the C++ name it starts with: "admit::redis::semaphore: name must not be empty" ->
// "name must not be empty". The command line names the option instead; a message without such a prefix is returned
// as it is.
[[nodiscard]] std::string without_cpp_name(std::string_view what);

// The length of the valid UTF-8 sequence at the start of `text`, or 0 when it does not start with one (empty text,
// a stray continuation byte, an overlong form, a surrogate, a code point above U+10FFFF, a cut sequence).
[[nodiscard]] std::size_t utf8_sequence_length(std::string_view text) noexcept;

}  // namespace admit::cli
