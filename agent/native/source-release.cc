/*
 * sandstream-source-release.node: points V8 at the executable's own copy of the agent's bundled
 * source, so the ~640 KB heap string V8 compiled the agent from stops being anonymous memory
 * (issue 32: an idle agent's anonymous memory; docs/agent.md, "Memory").
 *
 * Why it is there twice: V8 keeps a script's source for its life (functions are compiled from it
 * lazily, and stack traces read it for line numbers). In the single executable the source is a
 * string of the startup snapshot's heap, copied into an anonymous large-object page of every
 * agent, while the same bytes sit in the executable, inside the snapshot's data in the
 * NODE_SEA_BLOB note (serialised as they are: the bundle is ASCII, so a one-byte string).
 *
 * What it does: the build keeps the very string V8 compiled the bundle from reachable
 * (build-sea.mjs, sourceKeepingLoader); `externalize(source)` finds those bytes in the note of the
 * main program (the way sandstream-sea-release.node finds the note), checks every byte, and makes
 * the string external with that memory as its data (v8::String::MakeExternal: same string, same
 * contents, its characters now outside the heap). A private read-only file mapping: pages V8 reads
 * come from the page cache, clean, and the kernel can drop them again; nothing ever writes there.
 * Then one full, compacting GC (MemoryPressureNotification, critical) frees the string's old
 * page at once instead of whenever the next one comes: without it the idle agent held more than
 * before. (LowMemoryNotification repeats full GCs until nothing more is freed: 40 KB less for
 * twice the CPU, ~20 ms against ~9.) Anything unexpected (no note, bytes not found or not
 * equal, a string V8 will not externalise) leaves the string as it was and returns false.
 *
 * A classic Node addon (V8's API; N-API cannot externalise an existing string), built against the
 * headers of the very node the executable is made of (scripts/build-native.mjs).
 */
#include <elf.h>
#include <link.h>
#include <node.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace {

const char kNoteName[] = "NODE_SEA_BLOB";

size_t Align4(size_t n) { return (n + 3) & ~static_cast<size_t>(3); }

/* The bytes a string's characters are now read from; they belong to the executable's mapping. */
class MappedSource : public v8::String::ExternalOneByteStringResource {
 public:
  MappedSource(const char* data, size_t length) : data_(data), length_(length) {}
  const char* data() const override { return data_; }
  size_t length() const override { return length_; }

 private:
  const char* data_;
  size_t length_;
};

struct Note {
  const char* desc = nullptr;
  size_t size = 0;
};

/* The main program's NODE_SEA_BLOB note (the first object dl_iterate_phdr reports). */
int FindNote(struct dl_phdr_info* info, size_t, void* data) {
  Note* found = static_cast<Note*>(data);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* segment = &info->dlpi_phdr[i];
    if (segment->p_type != PT_NOTE) continue;
    const char* at = reinterpret_cast<const char*>(info->dlpi_addr + segment->p_vaddr);
    const char* end = at + segment->p_memsz;
    while (static_cast<size_t>(end - at) >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr)* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
      const char* name = at + sizeof(*note);
      const char* desc = name + Align4(note->n_namesz);
      if (desc > end || note->n_descsz > static_cast<size_t>(end - desc)) break;
      if (note->n_namesz == sizeof(kNoteName) && memcmp(name, kNoteName, sizeof(kNoteName)) == 0) {
        found->desc = desc;
        found->size = note->n_descsz;
        return 1;
      }
      at = desc + Align4(note->n_descsz);
    }
  }
  return 1;
}

/* Where in the note the string's characters are, checked byte for byte; nullptr if nowhere. */
const char* FindInNote(v8::Isolate* isolate, v8::Local<v8::String> source, const Note& note) {
  const int length = source->Length();
  const int probe = length < 4096 ? length : 4096;
  std::vector<uint8_t> chunk(64 * 1024);
  source->WriteOneByte(isolate, chunk.data(), 0, probe, v8::String::NO_NULL_TERMINATION);
  const char* from = note.desc;
  const char* end = note.desc + note.size;
  while (from < end) {
    const char* at = static_cast<const char*>(memmem(from, end - from, chunk.data(), probe));
    if (at == nullptr || static_cast<size_t>(end - at) < static_cast<size_t>(length)) return nullptr;
    bool equal = true;
    for (int offset = 0; equal && offset < length; offset += static_cast<int>(chunk.size())) {
      const int n = length - offset < static_cast<int>(chunk.size()) ? length - offset : static_cast<int>(chunk.size());
      source->WriteOneByte(isolate, chunk.data(), offset, n, v8::String::NO_NULL_TERMINATION);
      equal = memcmp(at + offset, chunk.data(), n) == 0;
    }
    if (equal) return at;
    source->WriteOneByte(isolate, chunk.data(), 0, probe, v8::String::NO_NULL_TERMINATION);
    from = at + 1;
  }
  return nullptr;
}

void Externalize(const v8::FunctionCallbackInfo<v8::Value>& args) {
  v8::Isolate* isolate = args.GetIsolate();
  args.GetReturnValue().Set(false);
  if (args.Length() < 1 || !args[0]->IsString()) return;
  v8::Local<v8::String> source = args[0].As<v8::String>();
  if (source->IsExternal() || !source->IsOneByte() || source->Length() == 0 ||
      !source->CanMakeExternal(v8::String::Encoding::ONE_BYTE_ENCODING))
    return;
  Note note;
  dl_iterate_phdr(FindNote, &note);
  if (note.desc == nullptr) return;
  const char* at = FindInNote(isolate, source, note);
  if (at == nullptr) return;
  if (!source->MakeExternal(new MappedSource(at, source->Length()))) return;
  // The search read the note's pages up to the source and the check the source's own: hand the
  // note's whole pages back, as sandstream-sea-release.node did (a later read faults them in
  // again from the page cache).
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(note.desc) + page - 1) & ~(page - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(note.desc) + note.size) & ~(page - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kCritical);
  args.GetReturnValue().Set(true);
}

}  // namespace

NODE_MODULE_INIT(/* exports, module, context */) {
  v8::Isolate* isolate = context->GetIsolate();
  exports
      ->Set(context, v8::String::NewFromUtf8Literal(isolate, "externalize"),
            v8::FunctionTemplate::New(isolate, Externalize)->GetFunction(context).ToLocalChecked())
      .Check();
}
