/*
 * sandstream-spawner: starts the processes of the agent's run steps, so that the agent — a
 * Node process of 50+ MB — never forks.
 *
 * Why: Node 20 (libuv) starts a child with fork(), which copies the page tables of the whole
 * parent and makes the parent take a page fault on each page it writes afterwards; measured
 * in the agent, that and Node's ChildProcess machinery were most of what a `true` step cost
 * beyond the Redis round trip. This helper is a few hundred KB, starts children with
 * posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK), no page-table copy) and relays their output.
 *
 * It is linked statically so it runs in any image (glibc, musl, no libc at all), and the agent
 * starts it once, at boot, with a pipe on its stdin (requests) and one on its stdout (events).
 * Every frame, both ways, is
 *
 *   u32 length (of what follows, little-endian)   u8 type   u32 id   payload
 *
 * Requests:  SPAWN (payload: string file, string cwd, u32 argc, argc strings, u32 envc, envc
 *            "NAME=value" strings; a string is u32 length + bytes), CLOSE_OUTPUT (no payload),
 *            PING (no payload; the agent's check at boot that this helper runs here at all),
 *            SPAWN_TTY (u32 cols, u32 rows, then SPAWN's payload without a stdin path),
 *            INPUT (bytes for a terminal's input), RESIZE (u32 cols, u32 rows),
 *            PAUSE_OUTPUT / RESUME_OUTPUT (no payload; see handle_pause).
 * Events:    SPAWNED (i32 pid), SPAWN_FAILED (i32 errno), STDOUT / STDERR (bytes),
 *            STDOUT_END / STDERR_END, EXIT (i32 raw wait status), PONG (no payload).
 *
 * The child gets what Node's spawn(file, args, { cwd, env, detached: true, stdio: ['ignore',
 * 'pipe', 'pipe'] }) gives it: its own session and so its own process group (pgid = pid; a
 * group of its own session is orphaned, so SIGTSTP/SIGTTIN/SIGTTOU cannot stop it), /dev/null as
 * stdin, every signal at its default disposition and unblocked, `file` looked up on the PATH of the child's environment,
 * and a file without a #! line run by /bin/sh (execvp's behaviour).
 *
 * A SPAWN_TTY child gets a pseudo-terminal instead: the slave as its stdin, stdout and stderr and
 * as the controlling terminal of its new session (opened after setsid, without O_NOCTTY), so
 * line editing, job control, Ctrl-C (the line discipline turns the byte into SIGINT for the
 * foreground group) and window sizes work as on a real terminal. Its output is relayed as STDOUT
 * from the master, and STDERR_END follows SPAWNED at once: a terminal has one stream.
 *
 * The helper is also a child subreaper: what a step leaves behind (a daemon, a grandchild whose
 * parent exited) is re-parented here and reaped, instead of lingering as a zombie when the agent
 * is PID 1 of its container. When its stdin closes (the agent exited or died), it kills the
 * process groups of steps still running, since nobody is left to report them, and exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

enum request_type {
  REQ_SPAWN = 1,
  REQ_CLOSE_OUTPUT = 2,
  REQ_PING = 3,
  REQ_SPAWN_TTY = 4,
  REQ_INPUT = 5,
  REQ_RESIZE = 6,
  REQ_PAUSE_OUTPUT = 7,
  REQ_RESUME_OUTPUT = 8,
};
enum event_type {
  EV_SPAWNED = 1,
  EV_SPAWN_FAILED = 2,
  EV_STDOUT = 3,
  EV_STDERR = 4,
  EV_STDOUT_END = 5,
  EV_STDERR_END = 6,
  EV_EXIT = 7,
  EV_PONG = 8,
};

#define HEADER_BYTES 9 /* u32 length + u8 type + u32 id */
/* A request is argv + environment; the kernel refuses an exec over a few MiB anyway. */
#define MAX_REQUEST_BYTES (16u * 1024 * 1024)
/* Output is relayed in frames of at most this much (the agent rejects larger frames). */
#define READ_CHUNK (64 * 1024 - HEADER_BYTES)
#define DEFAULT_PATH "/bin:/usr/bin"
/* Terminal input the program has not read yet; past this it is dropped (a terminal whose program
 * reads nothing cannot take more, and the helper must never block on one). */
#define MAX_PENDING_INPUT (1024 * 1024)
/* SO_SNDBUF for our stdout; Linux doubles it for its bookkeeping, so 32 KiB lets about the
 * 64 KiB a pipe holds wait for the agent, as when the agent read the child's pipe itself. */
#ifndef OUTPUT_BUFFER_BYTES
#define OUTPUT_BUFFER_BYTES (32 * 1024)
#endif

struct child;

/* What an epoll registration points at. */
struct watch {
  struct child *child; /* NULL for stdin and the signalfd */
  int fd;
  int stream; /* 0 stdout, 1 stderr */
};

struct child {
  uint32_t id;
  pid_t pid;
  int exited;
  /* Exited and both pipes closed: freed once the current batch of epoll events is handled,
   * since a later event of the same batch may still point at one of its watches. */
  int done;
  struct watch out[2];
  /* A terminal: out[0] is the pty master, which also takes the input. */
  int tty;
  /* PAUSE_OUTPUT: its output fds are out of epoll until RESUME_OUTPUT. */
  int paused;
  uint8_t *input;
  size_t input_used;
  struct child *next;
};

static struct child *children;
static int epfd;
static struct watch stdin_watch = {NULL, STDIN_FILENO, 0};
static struct watch signal_watch = {NULL, -1, 0};

static void agent_gone(void);

static void die(const char *what) {
  fprintf(stderr, "sandstream-spawner: %s: %s\n", what, strerror(errno));
  exit(3);
}

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Writes all of it to the agent, waiting while its pipe is full. */
static void write_all(const struct iovec *iov_in, int count) {
  struct iovec iov[2];
  memcpy(iov, iov_in, sizeof(struct iovec) * count);
  int first = 0;
  while (first < count) {
    ssize_t n = writev(STDOUT_FILENO, iov + first, count - first);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        /* Only if our stdout was handed over non-blocking: wait for room instead of failing. */
        struct pollfd ready = {STDOUT_FILENO, POLLOUT, 0};
        poll(&ready, 1, -1);
        continue;
      }
      if (errno == EPIPE) agent_gone();
      die("write");
    }
    while (first < count && (size_t)n >= iov[first].iov_len) {
      n -= iov[first].iov_len;
      first++;
    }
    if (first < count) {
      iov[first].iov_base = (uint8_t *)iov[first].iov_base + n;
      iov[first].iov_len -= n;
    }
  }
}

static void send_event(uint8_t type, uint32_t id, const void *payload, size_t length) {
  uint8_t header[HEADER_BYTES];
  put_u32(header, (uint32_t)(length + 5));
  header[4] = type;
  put_u32(header + 5, id);
  struct iovec iov[2] = {{header, HEADER_BYTES}, {(void *)payload, length}};
  write_all(iov, length > 0 ? 2 : 1);
}

static void send_i32(uint8_t type, uint32_t id, int32_t value) {
  uint8_t payload[4];
  put_u32(payload, (uint32_t)value);
  send_event(type, id, payload, 4);
}

/* ---- reading a SPAWN request ------------------------------------------------------------ */

struct reader {
  const uint8_t *p;
  size_t left;
  int bad;
};

static uint32_t read_u32(struct reader *r) {
  if (r->left < 4) {
    r->bad = 1;
    return 0;
  }
  uint32_t v = get_u32(r->p);
  r->p += 4;
  r->left -= 4;
  return v;
}

/* A NUL-terminated copy; a string with a NUL inside cannot reach exec intact, so it is refused. */
static char *read_string(struct reader *r) {
  uint32_t length = read_u32(r);
  if (r->bad || length > r->left || memchr(r->p, 0, length) != NULL) {
    r->bad = 1;
    return NULL;
  }
  char *s = malloc(length + 1);
  if (!s) die("malloc");
  memcpy(s, r->p, length);
  s[length] = 0;
  r->p += length;
  r->left -= length;
  return s;
}

static char **read_strings(struct reader *r, uint32_t *count_out) {
  uint32_t count = read_u32(r);
  /* Each string takes at least its 4-byte length. */
  if (r->bad || count > r->left / 4) {
    r->bad = 1;
    return NULL;
  }
  char **list = calloc(count + 1, sizeof(char *));
  if (!list) die("calloc");
  for (uint32_t i = 0; i < count && !r->bad; i++) list[i] = read_string(r);
  *count_out = count;
  return list;
}

static void free_strings(char **list, uint32_t count) {
  if (!list) return;
  for (uint32_t i = 0; i < count; i++) free(list[i]);
  free(list);
}

/* ---- finding the program, as execvp does with the child's PATH --------------------------- */

static const char *env_value(char **env, uint32_t count, const char *name) {
  size_t length = strlen(name);
  for (uint32_t i = 0; i < count; i++) {
    if (env[i] && strncmp(env[i], name, length) == 0 && env[i][length] == '=') return env[i] + length + 1;
  }
  return NULL;
}

/*
 * Fills `out` with the program to exec, or returns the errno execvp would have failed with.
 * PATH entries that are relative (or empty, meaning ".") are taken relative to the step's
 * working directory, where execvp would have looked after the child's chdir.
 */
static int resolve_program(const char *file, const char *cwd, const char *path, char *out, size_t size) {
  if (file[0] == 0) return ENOENT;
  if (strchr(file, '/')) {
    if ((size_t)snprintf(out, size, "%s", file) >= size) return ENAMETOOLONG;
    return 0;
  }
  if (!path) path = DEFAULT_PATH;
  int seen_eacces = 0;
  const char *p = path;
  for (;;) {
    const char *end = strchr(p, ':');
    size_t length = end ? (size_t)(end - p) : strlen(p);
    int written;
    if (length == 0)
      written = snprintf(out, size, "%s/%s", cwd, file);
    else if (p[0] == '/')
      written = snprintf(out, size, "%.*s/%s", (int)length, p, file);
    else
      written = snprintf(out, size, "%s/%.*s/%s", cwd, (int)length, p, file);
    if (written > 0 && (size_t)written < size) {
      /* As execvp: a match that cannot be executed (no x bit, a directory) is remembered as
       * EACCES and the search goes on. */
      struct stat st;
      if (stat(out, &st) == 0) {
        if (S_ISREG(st.st_mode) && access(out, X_OK) == 0) return 0;
        seen_eacces = 1;
      }
    }
    if (!end) break;
    p = end + 1;
  }
  return seen_eacces ? EACCES : ENOENT;
}

/* ---- children ---------------------------------------------------------------------------- */

static void unwatch(struct watch *w) {
  if (w->fd < 0) return;
  epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
  close(w->fd);
  w->fd = -1;
}

static void forget_if_done(struct child *c) {
  if (c->exited && c->out[0].fd < 0 && c->out[1].fd < 0) c->done = 1;
}

static void free_done_children(void) {
  struct child **link = &children;
  while (*link) {
    struct child *c = *link;
    if (c->done) {
      *link = c->next;
      free(c->input);
      free(c);
    } else {
      link = &c->next;
    }
  }
}

static struct child *find_child(uint32_t id) {
  for (struct child *c = children; c; c = c->next)
    if (c->id == id && !c->done) return c;
  return NULL;
}

/* `tty_path`: the pty slave to open as the child's stdin, stdout and stderr (out_fd, err_fd and
 * in_path unused); NULL: pipes. */
static int start_process(const char *program, char **argv, char **env, const char *cwd, const char *in_path,
                         int out_fd, int err_fd, const char *tty_path, pid_t *pid) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawn_file_actions_init(&actions);
  if (tty_path) {
    /* File actions run after setsid (glibc and musl alike): opening the slave without
     * O_NOCTTY makes it the new session's controlling terminal. */
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, tty_path, O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&actions, STDIN_FILENO, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, STDIN_FILENO, STDERR_FILENO);
  } else {
    /* stdin: the step's input file when it has one (the agent wrote it, 0600), else nothing. */
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, in_path ? in_path : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  }
  posix_spawn_file_actions_addchdir_np(&actions, cwd);
  posix_spawnattr_init(&attr);
  /* SETSID, as libuv does with setsid() for detached children: a new session whose group is
   * the child's own, so the agent signals -pid to reach every descendant. */
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  int rc = posix_spawn(pid, program, &actions, &attr, argv, env);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

/* A pty master (non-blocking, close-on-exec) sized cols x rows, and its slave's path. */
static int open_terminal(uint32_t cols, uint32_t rows, char *slave, size_t size) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return -errno;
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  if (grantpt(master) != 0 || unlockpt(master) != 0 || ptsname_r(master, slave, size) != 0 ||
      ioctl(master, TIOCSWINSZ, &ws) != 0) {
    int rc = errno ? errno : EIO;
    close(master);
    return -rc;
  }
  fcntl(master, F_SETFL, O_NONBLOCK);
  return master;
}

static void watch_output(struct child *c, int stream, int fd) {
  c->out[stream].child = c;
  c->out[stream].stream = stream;
  c->out[stream].fd = fd;
  if (fd < 0) return;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->out[stream]};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
}

/* SPAWN, or SPAWN_TTY (`tty`: its payload starts with u32 cols, u32 rows). */
static void handle_spawn(uint32_t id, const uint8_t *payload, size_t length, int tty) {
  struct reader r = {payload, length, 0};
  uint32_t cols = tty ? read_u32(&r) : 0, rows = tty ? read_u32(&r) : 0;
  uint32_t argc = 0, envc = 0;
  char *file = read_string(&r);
  char *cwd = read_string(&r);
  char **argv = read_strings(&r, &argc);
  char **env = read_strings(&r, &envc);
  /* Optional, after the environment: the path of the step's stdin ("" or absent: /dev/null). */
  char *in_path = !tty && r.left > 0 ? read_string(&r) : NULL;
  if (in_path && in_path[0] == '\0') {
    free(in_path);
    in_path = NULL;
  }
  int rc = 0;
  /* The agent always sends an absolute directory; a relative one would resolve PATH entries
   * against the helper's own directory instead of the step's. */
  if (r.bad || r.left != 0 || argc == 0 || cwd[0] != '/') rc = EINVAL;
  if (tty && (cols == 0 || rows == 0 || cols > 0xffff || rows > 0xffff)) rc = EINVAL;

  static char program[PATH_MAX];
  if (!rc) rc = resolve_program(file, cwd, env_value(env, envc, "PATH"), program, sizeof program);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, master = -1;
  char slave[128];
  const char *tty_path = NULL;
  if (!rc && tty) {
    master = open_terminal(cols, rows, slave, sizeof slave);
    if (master < 0) rc = -master;
    tty_path = slave;
  } else if (!rc && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
    rc = errno;
  }
  pid_t pid = 0;
  if (!rc) {
    rc = start_process(program, argv, env, cwd, in_path, out[1], err[1], tty_path, &pid);
    if (rc == ENOEXEC) {
      /* No #! line: execvp hands such a file to the shell, and so do we. */
      char **shell_argv = calloc(argc + 2, sizeof(char *));
      if (!shell_argv) die("calloc");
      shell_argv[0] = "/bin/sh";
      shell_argv[1] = program;
      for (uint32_t i = 1; i < argc; i++) shell_argv[i + 1] = argv[i];
      rc = start_process("/bin/sh", shell_argv, env, cwd, in_path, out[1], err[1], tty_path, &pid);
      free(shell_argv);
    }
  }
  if (out[1] >= 0) close(out[1]);
  if (err[1] >= 0) close(err[1]);

  if (rc) {
    if (out[0] >= 0) close(out[0]);
    if (err[0] >= 0) close(err[0]);
    if (master >= 0) close(master);
    send_i32(EV_SPAWN_FAILED, id, rc);
  } else {
    struct child *c = calloc(1, sizeof *c);
    if (!c) die("calloc");
    c->id = id;
    c->pid = pid;
    c->tty = tty;
    watch_output(c, 0, tty ? master : out[0]);
    watch_output(c, 1, tty ? -1 : err[0]);
    c->next = children;
    children = c;
    send_i32(EV_SPAWNED, id, pid);
    if (tty) send_event(EV_STDERR_END, id, NULL, 0);
  }
  free(file);
  free(cwd);
  free(in_path);
  free_strings(argv, argc);
  free_strings(env, envc);
}

/* Writes what the terminal takes now; the rest waits for EPOLLOUT on the master. */
static void flush_input(struct child *c) {
  struct watch *w = &c->out[0];
  size_t at = 0;
  while (at < c->input_used) {
    ssize_t n = write(w->fd, c->input + at, c->input_used - at);
    if (n > 0) {
      at += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n < 0 && errno != EAGAIN) at = c->input_used; /* the terminal is gone: drop it */
      break;
    }
  }
  memmove(c->input, c->input + at, c->input_used - at);
  c->input_used -= at;
  /* Paused: the master is out of epoll; RESUME_OUTPUT adds it back with EPOLLOUT if needed. */
  if (c->paused) return;
  struct epoll_event ev = {.events = EPOLLIN | (c->input_used ? EPOLLOUT : 0), .data.ptr = w};
  epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev);
}

static void handle_input(uint32_t id, const uint8_t *payload, size_t length) {
  struct child *c = find_child(id);
  if (!c || !c->tty || c->out[0].fd < 0 || length == 0) return;
  if (c->input_used + length > MAX_PENDING_INPUT) {
    fprintf(stderr, "sandstream-spawner: terminal %u reads no input; %zu bytes dropped\n", id, length);
    return;
  }
  if (!c->input) {
    c->input = malloc(MAX_PENDING_INPUT);
    if (!c->input) die("malloc");
  }
  memcpy(c->input + c->input_used, payload, length);
  c->input_used += length;
  flush_input(c);
}

static void handle_resize(uint32_t id, const uint8_t *payload, size_t length) {
  struct child *c = find_child(id);
  if (!c || !c->tty || c->out[0].fd < 0 || length != 8) return;
  uint32_t cols = get_u32(payload), rows = get_u32(payload + 4);
  if (cols == 0 || rows == 0 || cols > 0xffff || rows > 0xffff) return;
  /* The kernel sends SIGWINCH to the terminal's foreground group. */
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  ioctl(c->out[0].fd, TIOCSWINSZ, &ws);
}

/*
 * PAUSE_OUTPUT / RESUME_OUTPUT: back-pressure for one child. This helper is shared by every step
 * and terminal, so it must never stop reading as a whole; instead a paused child's output fds
 * leave epoll (EPOLL_CTL_DEL: a MOD to no events would still report EPOLLHUP), nothing more is
 * read from them, and only that child blocks once its pipe is full. Its exit is still reported
 * (reap does not look at the fds); the STDOUT_END / STDERR_END come after RESUME_OUTPUT, once
 * the pipe's remaining bytes are relayed, so the agent loses nothing written before the exit.
 */
static void handle_pause(uint32_t id, int pause) {
  struct child *c = find_child(id);
  if (!c || c->paused == pause) return;
  c->paused = pause;
  for (int stream = 0; stream < 2; stream++) {
    struct watch *w = &c->out[stream];
    if (w->fd < 0) continue;
    if (pause) {
      epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
    } else {
      /* A terminal may have input waiting for room (flush_input's MOD failed while paused). */
      uint32_t events = EPOLLIN | (c->tty && stream == 0 && c->input_used ? EPOLLOUT : 0);
      struct epoll_event ev = {.events = events, .data.ptr = w};
      if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &ev) != 0) die("epoll_ctl resume");
    }
  }
}

static void handle_request(uint8_t type, uint32_t id, const uint8_t *payload, size_t length) {
  if (type == REQ_SPAWN || type == REQ_SPAWN_TTY) {
    handle_spawn(id, payload, length, type == REQ_SPAWN_TTY);
  } else if (type == REQ_INPUT) {
    handle_input(id, payload, length);
  } else if (type == REQ_RESIZE) {
    handle_resize(id, payload, length);
  } else if (type == REQ_PAUSE_OUTPUT || type == REQ_RESUME_OUTPUT) {
    handle_pause(id, type == REQ_PAUSE_OUTPUT);
  } else if (type == REQ_PING) {
    send_event(EV_PONG, id, NULL, 0);
  } else if (type == REQ_CLOSE_OUTPUT) {
    struct child *c = find_child(id);
    if (!c) return;
    unwatch(&c->out[0]);
    unwatch(&c->out[1]);
    forget_if_done(c);
  } else {
    fprintf(stderr, "sandstream-spawner: unknown request type %u\n", type);
    exit(3);
  }
}

/* ---- the loop ---------------------------------------------------------------------------- */

static uint8_t *request_buffer;
static size_t request_used, request_size;

/* The agent is gone: steps still running have nobody to report to. */
static void agent_gone(void) {
  for (struct child *c = children; c; c = c->next)
    if (!c->exited) kill(-c->pid, SIGKILL);
  exit(0);
}

static void read_requests(void) {
  if (request_size - request_used < 65536) {
    size_t larger = request_size ? request_size * 2 : 131072;
    request_buffer = realloc(request_buffer, larger);
    if (!request_buffer) die("realloc");
    request_size = larger;
  }
  ssize_t n = read(STDIN_FILENO, request_buffer + request_used, request_size - request_used);
  if (n == 0) agent_gone();
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    die("read requests");
  }
  request_used += n;
  size_t at = 0;
  while (request_used - at >= 4) {
    uint32_t length = get_u32(request_buffer + at);
    if (length < 5 || length > MAX_REQUEST_BYTES) {
      fprintf(stderr, "sandstream-spawner: bad request length %u\n", length);
      exit(3);
    }
    if (request_used - at - 4 < length) {
      /* Make room for the rest of a large request. */
      while (request_size < (size_t)length + 4 + 65536) {
        request_buffer = realloc(request_buffer, request_size * 2);
        if (!request_buffer) die("realloc");
        request_size *= 2;
      }
      break;
    }
    const uint8_t *frame = request_buffer + at + 4;
    handle_request(frame[0], get_u32(frame + 1), frame + 5, length - 5);
    at += 4 + length;
  }
  memmove(request_buffer, request_buffer + at, request_used - at);
  request_used -= at;
}

static void relay_output(struct watch *w) {
  static uint8_t buffer[HEADER_BYTES + READ_CHUNK];
  struct child *c = w->child;
  ssize_t n = read(w->fd, buffer + HEADER_BYTES, READ_CHUNK);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    send_event(w->stream == 0 ? EV_STDOUT_END : EV_STDERR_END, c->id, NULL, 0);
    unwatch(w);
    forget_if_done(c);
    return;
  }
  put_u32(buffer, (uint32_t)(n + 5));
  buffer[4] = w->stream == 0 ? EV_STDOUT : EV_STDERR;
  put_u32(buffer + 5, c->id);
  struct iovec iov = {buffer, HEADER_BYTES + (size_t)n};
  write_all(&iov, 1);
}

static void reap(void) {
  struct signalfd_siginfo info;
  while (read(signal_watch.fd, &info, sizeof info) == sizeof info) {
  }
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (struct child *c = children; c; c = c->next) {
      if (c->pid != pid || c->exited) continue;
      c->exited = 1;
      send_i32(EV_EXIT, c->id, status);
      forget_if_done(c);
      break;
    }
  }
}

/*
 * Keeps what we relay but the agent has not read yet small, so that a step writing faster than
 * the agent takes its lines is held back by a full pipe, as it would be if the agent read the
 * pipe itself, instead of this helper and the child taking the CPU the agent needs to ship them
 * (the machine may have two cores for all of it). Measured with `seq 1 1000000`: with the
 * kernel's default (~200 KiB) the agent delivered 0.34-0.41x of the raw XADD rate against
 * 0.50-0.60x reading the pipe itself; with this, 0.55-0.75x, the child running as fast as before
 * (docs/benchmarks.md). Our stdout is a socket (Node's stdio pipes are socketpairs) or a pipe;
 * either way this is best effort.
 */
static void limit_output_buffer(void) {
  int bytes = OUTPUT_BUFFER_BYTES;
  if (setsockopt(STDOUT_FILENO, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0)
    fcntl(STDOUT_FILENO, F_SETPIPE_SZ, bytes);
}

int main(void) {
  /* The agent reads EPIPE from a dead agent as "exit"; a signal would kill us first. */
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0) die("sigprocmask");
  signal_watch.fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_watch.fd < 0) die("signalfd");
  /* Best effort: without it (an old kernel) orphans go to init as before. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  limit_output_buffer();
  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) die("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &stdin_watch};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, STDIN_FILENO, &ev) != 0) die("epoll_ctl stdin");
  ev.data.ptr = &signal_watch;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, signal_watch.fd, &ev) != 0) die("epoll_ctl signalfd");

  struct epoll_event events[16];
  for (;;) {
    int n = epoll_wait(epfd, events, 16, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      struct watch *w = events[i].data.ptr;
      if (w == &stdin_watch)
        read_requests();
      else if (w == &signal_watch)
        reap();
      else {
        if ((events[i].events & EPOLLOUT) && w->child && w->child->input_used && w->fd >= 0)
          flush_input(w->child);
        if ((events[i].events & ~EPOLLOUT) && w->fd >= 0) relay_output(w);
      }
    }
    free_done_children();
  }
}
