# Extracts the C++ code blocks (```cpp or ```c++) of one Markdown file into translation units, one a block, so that the
# build compiles every example the documentation shows.
#   awk -v out=DIR -v doc=NAME -v stem=STEM -f extract_snippets.awk FILE.md
# A block that defines `int main(` is a whole program and is written as it is. Any other block is a fragment: its
# #include lines go to the top, the rest becomes the body of a function, after snippet_prelude.hpp (every public
# header, and placeholders for the reader's own functions such as serve() or reply_429()). A #line directive points
# compiler messages at the Markdown file and line.
function flush_block(   file, i, whole) {
  n++
  file = sprintf("%s/%s_%02d.cpp", out, stem, n)
  whole = 0
  for (i = 1; i <= count; i++) if (lines[i] ~ /int main\(/) whole = 1
  printf "// Generated from %s line %d by tests/docs/extract_snippets.awk.\n", doc, first > file
  if (whole) {
    printf "#line %d \"%s\"\n", first, doc > file
    for (i = 1; i <= count; i++) print lines[i] > file
  } else {
    print "#include \"snippet_prelude.hpp\"" > file
    for (i = 1; i <= count; i++) if (lines[i] ~ /^#include/) print lines[i] > file
    printf "namespace snippet_%s_%02d {\n[[maybe_unused]] void run() {\n", stem, n > file
    for (i = 1; i <= count; i++) {
      printf "#line %d \"%s\"\n", first + i - 1, doc > file
      if (lines[i] ~ /^#include/) print "" > file; else print lines[i] > file
    }
    print "}\n}  // namespace" > file
  }
  close(file)
}
/^```(cpp|c\+\+)[ \t]*$/ && !inside { inside = 1; count = 0; first = FNR + 1; next }
/^```[ \t]*$/ && inside { inside = 0; flush_block(); next }
inside { lines[++count] = $0 }
