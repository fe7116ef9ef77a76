/**
 * The Python kernel: a stdlib-only runner the agent starts as `python3 -c <this>` on first use of
 * a Python context (docs/code-interpreter.md says why not ipykernel). It is a string because the
 * agent ships as one file and writes nothing into the sandbox: `-c` needs no file.
 *
 * Protocol (kernel-protocol.ts): cells arrive as JSON lines on fd 3; the runner answers with JSON
 * lines on fd 4: `stream` (print output, in order across stdout and stderr), `result` (a
 * mimebundle), `done` (with the exception, if any). sys.stdout and sys.stderr go through fd 4 so
 * their order is exact; what subprocesses write to fds 1 and 2 is forwarded by the agent as well.
 * SIGINT raises KeyboardInterrupt in the cell, which ends it and keeps the namespace.
 */
export const PYTHON_RUNNER = String.raw`
import ast, base64, io, json, linecache, os, signal, sys, threading, traceback

signal.signal(signal.SIGINT, signal.default_int_handler)
_requests = open(3, 'rb')
_lock = threading.Lock()
_current = [None]
_answered = [True]

def _send(message):
    data = (json.dumps(message) + '\n').encode('utf-8')
    with _lock:
        view = memoryview(data)
        while view:
            view = view[os.write(4, view):]

class _Stream(io.TextIOBase):
    def __init__(self, name, fd):
        self._name = name
        self._fd = fd
    @property
    def encoding(self):
        return 'utf-8'
    def writable(self):
        return True
    def isatty(self):
        return False
    def fileno(self):
        return self._fd
    def write(self, text):
        if not isinstance(text, str):
            raise TypeError('write() argument must be str, not ' + type(text).__name__)
        if text:
            _send({'type': 'stream', 'id': _current[0], 'name': self._name, 'text': text})
        return len(text)
    def flush(self):
        pass

sys.stdout = _Stream('stdout', 1)
sys.stderr = _Stream('stderr', 2)
sys.stdin = open(os.devnull)

_REPRS = (('_repr_html_', 'html'), ('_repr_markdown_', 'markdown'), ('_repr_svg_', 'svg'),
          ('_repr_png_', 'png'), ('_repr_json_', 'json'))

def _figure_png(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png', bbox_inches='tight')
    return base64.b64encode(buffer.getvalue()).decode('ascii')

def _bundle(value):
    data = {}
    # A matplotlib figure has no _repr_png_ (IPython renders it through a formatter of its own).
    figure_module = sys.modules.get('matplotlib.figure')
    if figure_module is not None and isinstance(value, figure_module.Figure):
        data['png'] = _figure_png(value)
    elif not isinstance(value, type):
        for method, key in _REPRS:
            fn = getattr(value, method, None)
            if not callable(fn):
                continue
            try:
                rep = fn()
            except Exception:
                continue
            if isinstance(rep, tuple):
                rep = rep[0]
            if rep is None:
                continue
            if key == 'png' and isinstance(rep, (bytes, bytearray)):
                rep = base64.b64encode(rep).decode('ascii')
            if key == 'json':
                try:
                    json.dumps(rep)
                except Exception:
                    continue
            data[key] = rep
    try:
        data['text'] = repr(value)
    except Exception as err:
        data['text'] = '<repr failed: %s>' % (err,)
    return data

def _result(value, main):
    message = {'type': 'result', 'id': _current[0], 'isMainResult': main}
    message.update(_bundle(value))
    _send(message)

def display(*values):
    """Shows each value as a result of the running cell (as Jupyter's display does)."""
    for value in values:
        _result(value, False)

def _figures():
    # Only when the cell (or an earlier one) imported pyplot: importing it costs a second.
    pyplot = sys.modules.get('matplotlib.pyplot')
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        figure = pyplot.figure(number)
        _send({'type': 'result', 'id': _current[0], 'isMainResult': False,
               'png': _figure_png(figure), 'text': repr(figure)})
    pyplot.close('all')

def _show(*args, **kwargs):
    # plt.show() sends the open figures at once, mid-cell, and closes them (as Jupyter's inline
    # backend does); Agg's own show would only warn that it cannot show anything.
    _figures()

class _PyplotHook:
    # Puts _show in pyplot as it is imported: the cell may import pyplot (or call
    # matplotlib.pyplot.show) any time, and importing it up front would cost every kernel a second.
    def find_spec(self, name, path, target=None):
        if name != 'matplotlib.pyplot':
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        load = spec.loader.exec_module
        def exec_module(module):
            load(module)
            module.show = _show
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _PyplotHook())

def _error(err):
    tb = err.__traceback__
    # Leave out the runner's own frames: the traceback starts in the cell.
    while tb is not None and tb.tb_frame.f_code.co_filename == '<string>':
        tb = tb.tb_next
    lines = traceback.format_exception(type(err), err, tb)
    return {'name': type(err).__name__, 'value': str(err), 'traceback': ''.join(lines)}

_namespace = {'__name__': '__main__', '__builtins__': __builtins__, 'display': display}
_count = [0]

def _execute(request):
    _current[0] = request.get('id')
    _answered[0] = False
    _count[0] += 1
    name = '<cell-%d>' % _count[0]
    code = request.get('code', '')
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    error = None
    try:
        tree = ast.parse(code, name, 'exec')
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, 'exec'), _namespace)
        value = eval(compile(last, name, 'eval'), _namespace) if last is not None else None
        _figures()
        if value is not None:
            _namespace['_'] = value
            _result(value, True)
    except BaseException as err:
        error = _error(err)
        try:
            _figures()
        except BaseException:
            pass
    _send({'type': 'done', 'id': _current[0], 'error': error})
    _answered[0] = True

_send({'type': 'ready', 'pid': os.getpid()})
while True:
    try:
        line = _requests.readline()
        if not line:
            break
        _execute(json.loads(line))
    except KeyboardInterrupt as err:
        # Between cells there is nothing to stop; in the runner's own code after the cell's end
        # (sending its results), the cell still gets its answer.
        if not _answered[0]:
            _answered[0] = True
            _send({'type': 'done', 'id': _current[0], 'error': _error(err)})
`;
