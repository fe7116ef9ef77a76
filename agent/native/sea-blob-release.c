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
 * The same load also gives back Node's private copy of the V8 startup data (~4.4 MB of anonymous
 * memory, issue 32). Node 20 copies the snapshot's V8 part out of the note into a buffer of its
 * own (new char[], so a malloc chunk in a mapping of its own, the data 16 bytes into its first
 * page) and keeps it for the process's life: V8 reads it while the isolate is made and again only
 * to make a new context, which the agent never does. The build (scripts/sea-blob.mjs) places that
 * data in the file 16 bytes past a page boundary too, so each whole page of the copy has a page of
 * the file with the same bytes at the same offset: those pages are replaced, byte for byte, by a
 * private mapping of the file (MAP_FIXED over the copy), page by page only where the bytes are
 * equal. Nothing a reader sees changes; the pages become clean file pages the kernel can drop and
 * read back, instead of anonymous memory. Anything unexpected (another layout, another malloc,
 * no readable file) leaves the copy as it is.
 *
 * Last, malloc_trim(0) returns the free pages inside malloc's heap that the boot left behind.
 *
 * No N-API call is made, so no Node headers are needed: the module's init function (the symbol
 * Node looks up in an N-API addon) does the work and hands back the `exports` it was given.
 * Built by scripts/build-native.mjs (a shared object; no static libc: it lives in the agent's
 * process, which the bundled glibc already serves).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Opaque N-API handles: only passed through, never dereferenced. */
typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;

static const char NOTE_NAME[] = "NODE_SEA_BLOB";

static size_t align4(size_t n) { return (n + 3) & ~(size_t)3; }

/* Layout of the blob (agent/scripts/sea-blob.mjs): the V8 startup data's place and size in it. */
#define SEA_MAGIC 0x143da20u
#define SEA_FLAG_USE_SNAPSHOT 2u
/* glibc: an mmapped chunk's header (prev_size, size) before its data; IS_MMAPPED in size's bits. */
#define CHUNK_HEADER 16
#define CHUNK_IS_MMAPPED 2u

static uint64_t read_u64(const char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static uint32_t read_u32(const char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Skips a u64-length string; NULL when it does not fit before end. */
static const char *skip_string(const char *at, const char *end) {
  if (at == NULL || (size_t)(end - at) < 8) return NULL;
  uint64_t length = read_u64(at);
  if (length > (uint64_t)(end - at - 8)) return NULL;
  return at + 8 + length;
}

/* Finds the V8 startup data inside the SEA blob; 0 when the blob is not the expected layout. */
static int find_v8_data(const char *blob, size_t size, const char **data, size_t *length) {
  const char *end = blob + size;
  if (size < 8 || read_u32(blob) != SEA_MAGIC || !(read_u32(blob + 4) & SEA_FLAG_USE_SNAPSHOT)) return 0;
  const char *at = skip_string(blob + 8, end); /* code path */
  if (at == NULL || (size_t)(end - at) < 8) return 0;
  at += 8 + 4 + 1;                                            /* main's length, snapshot magic, type */
  for (int i = 0; i < 3; i++) at = skip_string(at, end);     /* version, arch, platform */
  if (at == NULL || (size_t)(end - at) < 12) return 0;
  at += 4 + 4;                                                /* cache version tag, flags */
  uint32_t v8_size = read_u32(at);
  at += 4;
  if (v8_size > (size_t)(end - at)) return 0;
  *data = at;
  *length = v8_size;
  return 1;
}

struct mapping {
  uintptr_t start, end;
  uint64_t offset;
  unsigned dev_major, dev_minor;
  unsigned long inode;
  char perms[5];
  char path[4096];
};

/* Calls fn for each line of /proc/self/maps until it returns nonzero; returns that value. */
static int each_mapping(int (*fn)(const struct mapping *, void *), void *arg) {
  FILE *maps = fopen("/proc/self/maps", "re");
  if (maps == NULL) return 0;
  static struct mapping m;
  char line[4200];
  int result = 0;
  while (!result && fgets(line, sizeof line, maps) != NULL) {
    int path_at = 0;
    m.path[0] = 0;
    if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &m.start, &m.end, m.perms, &m.offset, &m.dev_major,
               &m.dev_minor, &m.inode, &path_at) < 7)
      continue;
    if (path_at > 0) {
      size_t n = strcspn(line + path_at, "\n");
      if (n >= sizeof m.path) n = sizeof m.path - 1;
      memcpy(m.path, line + path_at, n);
      m.path[n] = 0;
    }
    result = fn(&m, arg);
  }
  fclose(maps);
  return result;
}

struct file_of {
  uintptr_t address;
  struct mapping found;
};

static int mapping_of(const struct mapping *m, void *arg) {
  struct file_of *want = arg;
  if (want->address < m->start || want->address >= m->end) return 0;
  want->found = *m;
  return 1;
}

struct copy_search {
  const char *data;
  size_t length;
  uintptr_t page;
  uintptr_t copy;
};

/* An anonymous read-write mapping whose page starts an mmapped malloc chunk holding the data. */
static int find_copy(const struct mapping *m, void *arg) {
  struct copy_search *s = arg;
  if (m->inode != 0 || m->path[0] != 0 || strcmp(m->perms, "rw-p") != 0) return 0;
  if (m->end - m->start < s->length + CHUNK_HEADER) return 0;
  /* Only pages already in memory are read: Node's copy was written, so its pages are. Reading the
   * others would fault them in, and the 8 MB stacks of libuv's pool threads (started before this
   * runs) each gained ~4 MB of anonymous memory that way. */
  const size_t pages = (m->end - m->start) / s->page;
  unsigned char *resident = malloc(pages);
  if (resident == NULL) return 0;
  if (mincore((void *)m->start, m->end - m->start, resident) != 0) {
    free(resident);
    return 0;
  }
  int found = 0;
  for (uintptr_t at = m->start; !found && at + CHUNK_HEADER + s->length <= m->end; at += s->page) {
    if (!(resident[(at - m->start) / s->page] & 1)) continue;
    uint64_t size = read_u64((const char *)at + 8);
    if (!(size & CHUNK_IS_MMAPPED) || (size & ~(uint64_t)7) < s->length + CHUNK_HEADER) continue;
    if (memcmp((const char *)at + CHUNK_HEADER, s->data, s->page) != 0) continue;
    s->copy = at + CHUNK_HEADER;
    found = 1;
  }
  free(resident);
  return found;
}

/*
 * Maps the file over every whole page of Node's copy of the V8 data whose bytes equal the note's.
 * `data` points at the V8 data in the note (mapped from the executable).
 */
static void share_v8_copy(const char *data, size_t length, uintptr_t page) {
  if (length < 2 * page) return;
  struct copy_search search = {data, length, page, 0};
  if (!each_mapping(find_copy, &search)) return;
  const uintptr_t copy = search.copy;
  /* The file's offset of data: through the mapping that holds the note. */
  struct file_of note = {(uintptr_t)data, {0}};
  if (!each_mapping(mapping_of, &note) || note.found.inode == 0 || note.found.path[0] != '/') return;
  const uint64_t data_offset = note.found.offset + ((uintptr_t)data - note.found.start);
  if ((copy - data_offset) % page != 0) return; /* not aligned alike: nothing can be shared */
  int fd = open(note.found.path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  /* The path must still be the file that is mapped (not replaced since the process started). */
  if (fstat(fd, &st) != 0 || st.st_ino != note.found.inode || major(st.st_dev) != note.found.dev_major ||
      minor(st.st_dev) != note.found.dev_minor) {
    close(fd);
    return;
  }
  uintptr_t from = (copy + page - 1) & ~(page - 1);
  const uintptr_t to = (copy + length) & ~(page - 1);
  while (from < to) {
    /* A run of equal pages, mapped in one call. */
    uintptr_t run = from;
    while (run < to && memcmp((const void *)run, data + (run - copy), page) == 0) run += page;
    if (run > from) {
      void *at = mmap((void *)from, run - from, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
                      (off_t)(data_offset + (from - copy)));
      if (at == MAP_FAILED) break; /* MAP_FIXED failed: the old pages are still there, untouched */
    }
    from = run + page; /* skip the differing page (or step past the run's end) */
  }
  close(fd);
}

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
        const char *v8_data;
        size_t v8_length;
        /* Before the note is given back: the comparison reads its pages. */
        if (find_v8_data(desc, note->n_descsz, &v8_data, &v8_length)) share_v8_copy(v8_data, v8_length, page);
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
  /* The boot's freed memory (zones, parse buffers) sits in holes of malloc's heap that free()
   * keeps; the agent is about to idle, so hand those pages back now (~0.5 MB measured). */
  malloc_trim(0);
  return exports;
}
