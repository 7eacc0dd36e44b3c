//===- LspSupervisor.cpp - Keep the language server alive -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "LspSupervisor.h"

#include "flexsn/Tools/ParserHazards.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace mlir::flexsn;
using llvm::StringRef;
namespace json = llvm::json;

namespace {

/// A message larger than this is skipped unread: no editor sends one, and
/// allocating what a header claims would let one line take the memory.
constexpr size_t kMaxMessageBytes = 64u << 20;
/// Deeper JSON is rejected before it is parsed (the parser recurses).
constexpr int kMaxJsonDepth = 256;
/// Restarts after which the supervisor gives up (a backend that cannot
/// start at all).
constexpr int kMaxRestarts = 100;
/// How long a document's analysis may take before the next message is
/// sent anyway.
constexpr auto kAnalysisTimeout = std::chrono::seconds(60);

void logLine(const llvm::Twine &text) {
  llvm::errs() << "flexsn-lsp-server: " << text << "\n";
  llvm::errs().flush();
}

bool writeAll(int fd, StringRef bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes = bytes.drop_front(n);
  }
  return true;
}

/// Buffered reads of a file descriptor, line by line or by size.
class Reader {
public:
  explicit Reader(int fd) : fd(fd) {}

  /// The next line without its LF (and a CR before it); none at the end.
  std::optional<std::string> line() {
    std::string out;
    while (true) {
      if (pos == buffer.size() && !fill())
        return out.empty() ? std::nullopt : std::optional(out);
      size_t newline = buffer.find('\n', pos);
      if (newline == std::string::npos) {
        out.append(buffer, pos, std::string::npos);
        pos = buffer.size();
        if (out.size() > kMaxMessageBytes) // a header line never is
          out.erase(0, out.size() - 1);
        continue;
      }
      out.append(buffer, pos, newline - pos);
      pos = newline + 1;
      if (!out.empty() && out.back() == '\r')
        out.pop_back();
      return out;
    }
  }

  /// `size` bytes, or none if the input ends first. With `keep` false the
  /// bytes are dropped as they come (nothing is allocated for them).
  std::optional<std::string> bytes(size_t size, bool keep = true) {
    std::string out;
    while (size > 0) {
      if (pos == buffer.size() && !fill())
        return std::nullopt;
      size_t take = std::min(size, buffer.size() - pos);
      if (keep)
        out.append(buffer, pos, take);
      pos += take;
      size -= take;
    }
    return out;
  }

private:
  bool fill() {
    char chunk[1 << 16];
    ssize_t n;
    do {
      n = ::read(fd, chunk, sizeof(chunk));
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
      return false;
    buffer.assign(chunk, n);
    pos = 0;
    return true;
  }

  int fd;
  std::string buffer;
  size_t pos = 0;
};

/// The next message of `reader` in LSP's framing (headers, an empty line,
/// then Content-Length bytes), read as editors actually write it: LF or
/// CRLF line ends, any case and spacing around the header. Messages it
/// cannot frame are skipped with a log line. None at the end of input.
std::optional<std::string> readFramedMessage(Reader &reader) {
  while (true) {
    size_t length = 0;
    bool hasLength = false, sawHeader = false;
    while (true) {
      std::optional<std::string> line = reader.line();
      if (!line)
        return std::nullopt;
      StringRef header = StringRef(*line).trim();
      if (header.empty()) {
        if (sawHeader)
          break;
        continue; // blank lines between messages
      }
      sawHeader = true;
      auto [name, value] = header.split(':');
      if (!name.trim().equals_insensitive("content-length"))
        continue;
      size_t size;
      if (value.trim().getAsInteger(10, size)) {
        logLine("a Content-Length that is not a number ('" + value.trim() +
                "'): the message is skipped");
        hasLength = false;
        continue;
      }
      length = size;
      hasLength = true;
    }
    if (!hasLength) {
      logLine("a message without a Content-Length: skipped");
      continue;
    }
    if (length > kMaxMessageBytes) {
      logLine("a message of " + std::to_string(length) +
              " bytes is over the limit of " +
              std::to_string(kMaxMessageBytes) + ": skipped");
      if (!reader.bytes(length, /*keep=*/false))
        return std::nullopt;
      continue;
    }
    return reader.bytes(length);
  }
}

/// The next message of MLIR's `-lit-test` transport: the lines up to a
/// `// -----` line, other `//` lines being comments.
std::optional<std::string> readDelimitedMessage(Reader &reader) {
  std::string message;
  while (std::optional<std::string> line = reader.line()) {
    StringRef text = StringRef(*line).ltrim();
    if (text.starts_with("// -----"))
      return message;
    if (text.starts_with("//"))
      continue;
    message += *line;
    message += '\n';
  }
  if (StringRef(message).trim().empty())
    return std::nullopt;
  return message;
}

/// Whether `text` nests arrays and objects deeper than the limit (strings
/// skipped): checked before the recursive JSON parser sees it.
bool nestsTooDeep(StringRef text) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

/// The LSP position (line, UTF-16 code unit) of byte `offset` of `text`.
json::Object positionOf(StringRef text, size_t offset) {
  offset = std::min(offset, text.size());
  StringRef before = text.take_front(offset);
  size_t lineStart = before.rfind('\n');
  lineStart = lineStart == StringRef::npos ? 0 : lineStart + 1;
  int64_t character = 0;
  for (size_t i = lineStart; i < offset; ++i) {
    unsigned char c = text[i];
    if ((c & 0xC0) == 0x80)
      continue;                     // a continuation byte
    character += c >= 0xF0 ? 2 : 1; // 4-byte sequences are surrogate pairs
  }
  return json::Object{{"line", int64_t(before.count('\n'))},
                      {"character", character}};
}

/// The byte offset of LSP position `position` in `text` (clamped).
size_t offsetOf(StringRef text, const json::Object *position) {
  int64_t line = 0, character = 0;
  if (position) {
    line = position->getInteger("line").value_or(0);
    character = position->getInteger("character").value_or(0);
  }
  size_t offset = 0;
  for (int64_t l = 0; l < line && offset < text.size(); ++l) {
    size_t newline = text.find('\n', offset);
    if (newline == StringRef::npos)
      return text.size();
    offset = newline + 1;
  }
  while (character > 0 && offset < text.size() && text[offset] != '\n') {
    unsigned char c = text[offset];
    size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    character -= length == 4 ? 2 : 1;
    offset = std::min(text.size(), offset + length);
  }
  return offset;
}

enum class DocumentState { Sent, Hazard, Crashed };

struct Document {
  std::string text;
  int64_t version = 0;
  std::string languageId = "mlir";
  DocumentState state = DocumentState::Sent;
};

class Supervisor {
public:
  Supervisor(std::vector<std::string> backend, bool litTest)
      : backend(std::move(backend)), litTest(litTest) {}

  int run() {
    std::signal(SIGPIPE, SIG_IGN);
    if (!startBackend())
      return 1;
    // Three threads: this one reads the editor, `output` the backend, and
    // `input` writes to the backend. No thread writes to the backend while
    // holding `mutex`, so a backend blocked on a full output pipe never
    // blocks the thread that drains it.
    std::thread output([this] { forwardBackendOutput(); });
    std::thread input([this] { writeToBackend(); });
    Reader editor(STDIN_FILENO);
    while (true) {
      std::optional<std::string> message =
          litTest ? readDelimitedMessage(editor) : readFramedMessage(editor);
      if (!message)
        break;
      handleEditorMessage(*message);
      std::lock_guard<std::mutex> lock(mutex);
      if (finished)
        break;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      exiting = true; // the writer closes the backend's input when done
      outboxReady.notify_all();
    }
    output.join();
    input.join();
    return exitCode;
  }

private:
  //===--------------------------------------------------------------------===//
  // The backend process
  //===--------------------------------------------------------------------===//

  /// Starts the backend with pipes to its standard input and output.
  /// Called with `mutex` held (or before the output thread starts).
  bool startBackend() {
    int toChild[2], fromChild[2];
    if (::pipe(toChild) != 0 || ::pipe(fromChild) != 0) {
      logLine("cannot create the backend's pipes");
      return false;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      logLine("cannot start the backend");
      return false;
    }
    if (pid == 0) {
      ::dup2(toChild[0], STDIN_FILENO);
      ::dup2(fromChild[1], STDOUT_FILENO);
      for (int fd : {toChild[0], toChild[1], fromChild[0], fromChild[1]})
        ::close(fd);
      std::vector<char *> argv;
      for (const std::string &arg : backend)
        argv.push_back(const_cast<char *>(arg.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(toChild[0]);
    ::close(fromChild[1]);
    childPid = pid;
    childInput = toChild[1]; // the writer's from now on
    childOutput = fromChild[0];
    ++generation;
    outboxReady.notify_all();
    return true;
  }

  /// Queues `message` for the backend, in its framing. With `mutex` held.
  void sendToBackend(const json::Value &message) {
    std::string text;
    llvm::raw_string_ostream os(text);
    if (litTest)
      os << llvm::formatv("{0:2}", message) << "\n// -----\n";
    else
      os << "Content-Length: " << llvm::formatv("{0}", message).str().size()
         << "\r\n\r\n"
         << llvm::formatv("{0}", message);
    outbox.emplace_back(generation, std::move(text));
    outboxReady.notify_all();
  }

  /// The writer: sends the queued messages of the current backend (those
  /// for a backend that died are dropped), and closes a backend's input
  /// once a newer one runs or the session ends.
  void writeToBackend() {
    int fd = -1, fdGeneration = -1;
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      outboxReady.wait(lock, [&] { return !outbox.empty() || exiting; });
      if (outbox.empty()) { // exiting: the backend sees the end of input
        if (fd >= 0)
          ::close(fd);
        if (fdGeneration != generation && childInput >= 0)
          ::close(childInput);
        return;
      }
      auto [messageGeneration, text] = std::move(outbox.front());
      outbox.pop_front();
      if (messageGeneration != generation)
        continue;
      if (fdGeneration != generation) {
        if (fd >= 0)
          ::close(fd);
        fd = childInput;
        fdGeneration = generation;
      }
      lock.unlock();
      bool written = fd >= 0 && writeAll(fd, text);
      lock.lock();
      // A failed write: the backend died, and the output thread, seeing
      // its output end, restarts it.
      if (!written && fd >= 0 && fdGeneration == generation) {
        ::close(fd);
        fd = -1;
      }
    }
  }

  /// Copies the backend's messages to the editor (the answer to
  /// `initialize` asking for full-text sync), and restarts the backend
  /// when it dies.
  void forwardBackendOutput() {
    while (true) {
      int fd;
      {
        std::lock_guard<std::mutex> lock(mutex);
        fd = childOutput;
      }
      Reader reader(fd);
      while (std::optional<std::string> body = readFramedMessage(reader))
        handleBackendMessage(*body);
      std::unique_lock<std::mutex> lock(mutex);
      ::close(childOutput);
      int status = 0;
      ::waitpid(childPid, &status, 0);
      if (exiting || exitRequested) {
        exitCode =
            exitRequested && WIFEXITED(status) ? WEXITSTATUS(status) : exitCode;
        finished = true;
        analysed.notify_all();
        // After `exit` the editor need not close our input: end here.
        if (exitRequested && !exiting)
          ::_exit(exitCode);
        return;
      }
      if (++restarts > kMaxRestarts || !restartBackend(status)) {
        logLine("the backend cannot be restarted: giving up");
        exitCode = 1;
        finished = true;
        analysed.notify_all();
        return;
      }
    }
  }

  /// After the backend died: answers its requests in flight, marks the
  /// document it was analysing, starts a new one and gives it what the
  /// old one had. With `mutex` held.
  bool restartBackend(int status) {
    std::string how = WIFSIGNALED(status)
                          ? "signal " + std::to_string(WTERMSIG(status))
                          : "exit code " + std::to_string(WEXITSTATUS(status));
    logLine("the backend died (" + how + "); restarting it");
    for (const json::Value &id : inFlight)
      writeToEditor(json::Object{
          {"jsonrpc", "2.0"},
          {"id", id},
          {"error", json::Object{{"code", -32603},
                                 {"message", "flexsn-lsp-server: the server "
                                             "crashed and was restarted"}}}});
    inFlight.clear();
    if (analysing) {
      auto it = documents.find(*analysing);
      if (it != documents.end()) {
        it->second.state = DocumentState::Crashed;
        publishOwnDiagnostic(
            *analysing, it->second, 0,
            "flexsn-lsp-server: MLIR's parser crashed on this text (it is "
            "not analysed until it changes); flexsn-opt reports the error");
      }
      analysing.reset();
      analysed.notify_all();
    }
    if (!startBackend())
      return false;
    if (initializeRequest) {
      json::Object replay = *initializeRequest;
      replay["id"] = kReplayId;
      sendToBackend(json::Value(std::move(replay)));
      sendToBackend(json::Object{{"jsonrpc", "2.0"},
                                 {"method", "initialized"},
                                 {"params", json::Object{}}});
    }
    for (auto &[uri, document] : documents)
      if (document.state == DocumentState::Sent)
        sendToBackend(didOpen(uri, document));
    return true;
  }

  void handleBackendMessage(const std::string &body) {
    llvm::Expected<json::Value> parsed = json::parse(body);
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      std::lock_guard<std::mutex> lock(mutex);
      writeRawToEditor(body);
      return;
    }
    json::Object *message = parsed->getAsObject();
    std::lock_guard<std::mutex> lock(mutex);
    if (!message) {
      writeToEditor(*parsed);
      return;
    }
    if (const json::Value *id = message->get("id");
        id && !message->get("method")) {
      if (*id == json::Value(kReplayId))
        return; // the answer to a replayed initialize
      llvm::erase_if(inFlight, [&](const json::Value &v) { return v == *id; });
      const json::Value *initializeId =
          initializeRequest ? initializeRequest->get("id") : nullptr;
      if (initializeId && *id == *initializeId)
        if (json::Object *result = message->getObject("result"))
          if (json::Object *capabilities = result->getObject("capabilities"))
            (*capabilities)["textDocumentSync"] =
                json::Object{{"openClose", true},
                             {"change", 1}, // full text
                             {"save", true}};
    }
    if (message->getString("method") == "textDocument/publishDiagnostics") {
      if (const json::Object *params = message->getObject("params"))
        if (std::optional<StringRef> uri = params->getString("uri");
            uri && analysing && *uri == *analysing) {
          analysing.reset();
          analysed.notify_all();
        }
    }
    writeToEditor(*parsed);
  }

  //===--------------------------------------------------------------------===//
  // The editor
  //===--------------------------------------------------------------------===//

  void writeRawToEditor(StringRef body) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "Content-Length: " << body.size() << "\r\n\r\n" << body;
    writeAll(STDOUT_FILENO, text);
  }

  void writeToEditor(const json::Value &message) {
    writeRawToEditor(litTest ? llvm::formatv("{0:2}", message).str()
                             : llvm::formatv("{0}", message).str());
  }

  void answerError(int code, StringRef text) {
    logLine(text);
    writeToEditor(json::Object{
        {"jsonrpc", "2.0"},
        {"id", nullptr},
        {"error",
         json::Object{{"code", code},
                      {"message", ("flexsn-lsp-server: " + text).str()}}}});
  }

  void handleEditorMessage(const std::string &text) {
    if (nestsTooDeep(text)) {
      std::lock_guard<std::mutex> lock(mutex);
      answerError(-32600, "a message nested deeper than " +
                              std::to_string(kMaxJsonDepth) +
                              " levels: skipped");
      return;
    }
    llvm::Expected<json::Value> parsed = json::parse(text);
    if (!parsed) {
      std::string error = llvm::toString(parsed.takeError());
      std::lock_guard<std::mutex> lock(mutex);
      answerError(-32700,
                  "a message that is not JSON (" + error + "): skipped");
      return;
    }
    json::Object *message = parsed->getAsObject();
    if (!message) {
      std::lock_guard<std::mutex> lock(mutex);
      answerError(-32600, "a message that is not a JSON object: skipped");
      return;
    }
    std::unique_lock<std::mutex> lock(mutex);
    std::optional<StringRef> method = message->getString("method");
    if (method == "initialize")
      initializeRequest = *message;
    if (method == "exit")
      exitRequested = true;
    if (method == "textDocument/didOpen" ||
        method == "textDocument/didChange" ||
        method == "textDocument/didClose") {
      handleDocument(*method, message->getObject("params"), lock);
      return;
    }
    if (const json::Value *id = message->get("id"); id && method)
      inFlight.push_back(*id);
    sendToBackend(*parsed);
  }

  /// Keeps the document's text, and sends the backend what is safe to
  /// parse (its own diagnostics otherwise). With `mutex` held by `lock`.
  void handleDocument(StringRef method, const json::Object *params,
                      std::unique_lock<std::mutex> &lock) {
    const json::Object *item =
        params ? params->getObject("textDocument") : nullptr;
    std::optional<StringRef> uri = item ? item->getString("uri") : std::nullopt;
    if (!uri) {
      answerError(-32602, (method + " without a textDocument.uri").str());
      return;
    }
    std::string key = uri->str();
    bool wasSent =
        documents.count(key) && documents[key].state == DocumentState::Sent;
    if (method == "textDocument/didClose") {
      documents.erase(key);
      if (wasSent)
        sendToBackend(didClose(key));
      return;
    }
    Document &document = documents[key];
    document.version = item->getInteger("version").value_or(document.version);
    if (method == "textDocument/didOpen") {
      document.text = item->getString("text").value_or("").str();
      if (std::optional<StringRef> id = item->getString("languageId"))
        document.languageId = id->str();
    } else if (const json::Array *changes =
                   params->getArray("contentChanges")) {
      for (const json::Value &value : *changes)
        applyChange(document.text, value.getAsObject());
    }

    std::vector<ParserHazard> hazards = findParserHazards(document.text);
    if (!hazards.empty()) {
      document.state = DocumentState::Hazard;
      publishHazards(key, document, hazards);
      if (wasSent)
        sendToBackend(didClose(key));
      return;
    }
    document.state = DocumentState::Sent;
    analysing = key;
    if (wasSent)
      sendToBackend(json::Object{
          {"jsonrpc", "2.0"},
          {"method", "textDocument/didChange"},
          {"params",
           json::Object{
               {"textDocument",
                json::Object{{"uri", key}, {"version", document.version}}},
               {"contentChanges",
                json::Array{json::Object{{"text", document.text}}}}}}});
    else
      sendToBackend(didOpen(key, document));
    // One document at a time: were the backend to die on it, this is the
    // one it died on.
    analysed.wait_for(lock, kAnalysisTimeout,
                      [&] { return !analysing || finished; });
    analysing.reset();
  }

  static void applyChange(std::string &text, const json::Object *change) {
    if (!change)
      return;
    std::string replacement = change->getString("text").value_or("").str();
    const json::Object *range = change->getObject("range");
    if (!range) {
      text = std::move(replacement);
      return;
    }
    size_t begin = offsetOf(text, range->getObject("start"));
    size_t end = std::max(begin, offsetOf(text, range->getObject("end")));
    text.replace(begin, end - begin, replacement);
  }

  static json::Value didClose(const std::string &uri) {
    return json::Object{
        {"jsonrpc", "2.0"},
        {"method", "textDocument/didClose"},
        {"params", json::Object{{"textDocument", json::Object{{"uri", uri}}}}}};
  }

  static json::Value didOpen(const std::string &uri, const Document &doc) {
    return json::Object{
        {"jsonrpc", "2.0"},
        {"method", "textDocument/didOpen"},
        {"params", json::Object{{"textDocument",
                                 json::Object{{"uri", uri},
                                              {"languageId", doc.languageId},
                                              {"version", doc.version},
                                              {"text", doc.text}}}}}};
  }

  void publishHazards(const std::string &uri, const Document &document,
                      const std::vector<ParserHazard> &hazards) {
    json::Array diagnostics;
    for (const ParserHazard &hazard : hazards) {
      json::Object at = positionOf(document.text, hazard.offset);
      diagnostics.push_back(
          json::Object{{"range", json::Object{{"start", json::Object(at)},
                                              {"end", std::move(at)}}},
                       {"severity", 1},
                       {"source", "flexsn"},
                       {"message", hazard.message}});
    }
    writeToEditor(json::Object{
        {"jsonrpc", "2.0"},
        {"method", "textDocument/publishDiagnostics"},
        {"params", json::Object{{"uri", uri},
                                {"version", document.version},
                                {"diagnostics", std::move(diagnostics)}}}});
  }

  void publishOwnDiagnostic(const std::string &uri, const Document &document,
                            size_t offset, StringRef text) {
    publishHazards(uri, document, {{offset, text.str()}});
  }

  static constexpr int64_t kReplayId = -1000000007;

  const std::vector<std::string> backend;
  const bool litTest;

  std::mutex mutex;
  std::condition_variable analysed, outboxReady;
  std::deque<std::pair<int, std::string>> outbox;
  int generation = 0; // of the running backend
  pid_t childPid = -1;
  int childInput = -1, childOutput = -1;
  std::map<std::string, Document> documents;
  std::optional<json::Object> initializeRequest;
  std::vector<json::Value> inFlight;
  std::optional<std::string> analysing;
  bool exitRequested = false, exiting = false, finished = false;
  int restarts = 0;
  int exitCode = 0;
};

} // namespace

int mlir::flexsn::lsp::runSupervisor(const std::vector<std::string> &backend,
                                     bool litTest) {
  return Supervisor(backend, litTest).run();
}
