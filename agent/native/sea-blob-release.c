/*
 * sandstream-sea-release.node: gives back the pages of the single executable's startup blob once
 * the agent no longer needs them. Loading it (process.dlopen) is the whole job; it exports nothing.
 *
 * Why: the agent's single executable carries its V8 startup snapshot in an ELF note that
 * postject appends (NODE_SEA_BLOB, ~7 MB). Node 20 reads the snapshot from that note while it
 * starts and deserialises it into memory of its own; it never reads the note again, but every
 * page of it stays mapped, so ~7 MB of the agent's RSS — a tenth of its budget (issue 18: RSS
 * <= 80 MB) — are pages nothing uses. Node offers no way to unmap them from JavaScript.
 *
 * MADV_DONTNEED on a private read-only file mapping only drops the process's page-table entries:
 * the file is unchanged, and a later read (there is none in Node 20) would fault the page back in
 * from the page cache. So this is safe even if some code did look at the note again.
 *
 * The note is found the way postject's own lookup finds it: the main program's PT_NOTE segments
 * (dl_iterate_phdr), note by note, by name. Only whole pages inside the note are advised, so no
 * neighbouring data is touched. A process without the note (plain `node`) is left alone.
 *
 * No N-API call is made, so no Node headers are needed: the module's init function (the symbol
 * Node looks up in an N-API addon) does the work and hands back the `exports` it was given.
 * Built by scripts/build-native.mjs (a shared object; no static libc: it lives in the agent's
 * process, which the bundled glibc already serves).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Opaque N-API handles: only passed through, never dereferenced. */
typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;

static const char NOTE_NAME[] = "NODE_SEA_BLOB";

static size_t align4(size_t n) { return (n + 3) & ~(size_t)3; }

/* Advises away the whole pages of the named note; returns 1 when it was found (stops the walk). */
static int release_in(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
    if (segment->p_type != PT_NOTE) continue;
    const char *at = (const char *)(info->dlpi_addr + segment->p_vaddr);
    const char *end = at + segment->p_memsz;
    while ((size_t)(end - at) >= sizeof(ElfW(Nhdr))) {
      const ElfW(Nhdr) *note = (const ElfW(Nhdr) *)at;
      const char *name = at + sizeof(*note);
      const char *desc = name + align4(note->n_namesz);
      if (desc > end || note->n_descsz > (size_t)(end - desc)) break; /* malformed: stop here */
      if (note->n_namesz == sizeof(NOTE_NAME) && memcmp(name, NOTE_NAME, sizeof(NOTE_NAME)) == 0) {
        uintptr_t from = ((uintptr_t)desc + page - 1) & ~(page - 1);
        uintptr_t to = ((uintptr_t)desc + note->n_descsz) & ~(page - 1);
        if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
        return 1;
      }
      at = desc + align4(note->n_descsz);
    }
  }
  /* The first object dl_iterate_phdr reports is the main program; the note can only be there. */
  return 1;
}

napi_value napi_register_module_v1(napi_env env, napi_value exports) {
  (void)env;
  dl_iterate_phdr(release_in, NULL);
  return exports;
}
