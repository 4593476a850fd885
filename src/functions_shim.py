# src/functions_shim.py - the kernel's side of host functions (kbox/functions.h).
#
# libkbox runs this in a kernel (ipykernel) once per kernel, in a namespace
# of its own, with _SPEC: base64 of {"marker": ..., "functions": [def, ...]}.
# It makes the module kbox_functions and puts each function in it and in
# the user's namespace.  A call goes to the host as an input_request on the
# stdin channel whose prompt is the marker and {"calls": [{"name", "args"}]};
# the host answers with one input_reply whose value is
# {"results": [{"ok": true, "value": V} | {"ok": false, "kind", "error"}]}.
# It is sent on the kernel's stdin socket directly (as the kernel's own
# input() does), so it needs no allow_stdin, and the code's input() keeps
# its own behaviour.
import asyncio
import base64
import inspect
import json
import keyword
import sys
import threading
import types

import zmq
from IPython import get_ipython

_spec = json.loads(base64.b64decode(_SPEC).decode())
_marker = _spec['marker']
_kernel = get_ipython().kernel
_pending = []
# one request on the stdin socket at a time, whatever thread calls
_lock = threading.Lock()

mod = sys.modules.get('kbox_functions')
if mod is None:
    mod = types.ModuleType('kbox_functions', 'Host functions: the functions this session was given.')
    sys.modules['kbox_functions'] = mod


class FunctionError(Exception):
    """A host function's call failed: the function's own error text."""


class ArgumentError(FunctionError, TypeError):
    """The arguments break the function's schema: the message says which rule."""


class FunctionTimeout(FunctionError, TimeoutError):
    """The function did not answer within its time limit."""


class CallBudgetExceeded(FunctionError):
    """The execution made all the calls it may make."""


_errors = {'invalid': ArgumentError, 'timeout': FunctionTimeout,
           'budget': CallBudgetExceeded}
for _c in (FunctionError, ArgumentError, FunctionTimeout, CallBudgetExceeded):
    _c.__module__ = 'kbox_functions'
    setattr(mod, _c.__name__, _c)

_types = {'string': str, 'integer': int, 'number': float, 'boolean': bool,
          'array': list, 'object': dict, 'null': type(None)}


def _hint(s):
    t = s.get('type') if isinstance(s, dict) else None
    return _types.get(t, inspect.Parameter.empty) if isinstance(t, str) else inspect.Parameter.empty


def _plain(v):
    # numpy and pandas scalars and arrays, as their Python values
    for m in ('item', 'tolist'):
        f = getattr(v, m, None)
        if callable(f):
            try:
                return f()
            except Exception:
                pass
    raise TypeError(f'an argument of type {type(v).__name__} cannot be sent: '
                    'pass str, int, float, bool, None, list or dict')


def _accepts_none(s):
    t = s.get('type') if isinstance(s, dict) else None
    return t is None or t == 'null' or (isinstance(t, list) and 'null' in t)


def _roundtrip(calls):
    with _lock:
        return _roundtrip_locked(calls)


def _parent_id(k):
    return (k.get_parent('shell') or {}).get('header', {}).get('msg_id')


def _roundtrip_locked(calls):
    k = _kernel
    try:
        text = json.dumps({'calls': calls}, ensure_ascii=False, allow_nan=False,
                          default=_plain)
    except (ValueError, TypeError) as e:
        # (NaN, infinities, and values JSON has no word for)
        raise ArgumentError(f'{calls[0]["name"]}(): {e}') from None
    if len(text) > _spec['request_max'] // 4 and len(text.encode()) > _spec['request_max']:
        # (more would end the stdin connection, input() with it)
        raise ArgumentError(f'{calls[0]["name"]}(): the arguments of the calls made together '
                            f'take {len(text.encode())} bytes, over the {_spec["request_max"]} '
                            'a request may have: send less at a time')
    sys.stdout.flush()
    sys.stderr.flush()
    # what an earlier, interrupted call left unread
    while True:
        try:
            k.stdin_socket.recv_multipart(zmq.NOBLOCK)
        except zmq.ZMQError as e:
            if e.errno == zmq.EAGAIN:
                break
            raise
    parent = k.get_parent('shell')
    sent = k.session.send(k.stdin_socket, 'input_request',
                          {'prompt': _marker + text, 'password': False},
                          parent, ident=k._parent_ident['shell'])
    mid = sent['header']['msg_id']
    pid = (parent or {}).get('header', {}).get('msg_id')
    while True:
        # a call made by a thread while no execution ran is never
        # answered: it ends once another execution begins
        if _parent_id(k) != pid:
            raise FunctionError(f'{calls[0]["name"]}(): not answered: the execution it was '
                                'made in had ended (call the host functions while the '
                                'execution runs)')
        # a select with a timeout, so that an interrupt gets through
        r, _, x = zmq.select([k.stdin_socket], [], [k.stdin_socket], 0.05)
        if r or x:
            _, reply = k.session.recv(k.stdin_socket)
            if isinstance(reply, dict) and reply.get('parent_header', {}).get('msg_id') == mid:
                break
    v = reply.get('content', {}).get('value')
    try:
        v = json.loads(v)
    except Exception:
        v = {}
    res = v.get('results') if isinstance(v, dict) else None
    if isinstance(res, list) and len(res) == len(calls):
        return res
    raise FunctionError(f'{calls[0]["name"]}(): '
                        + (v.get('error') if isinstance(v, dict) and isinstance(v.get('error'), str)
                           else 'the host did not answer the call'))


def _error(name, r):
    # the exception for a failed call R, or None when it did not fail
    if r.get('ok'):
        return None
    return _errors.get(r.get('kind'), FunctionError)(f'{name}(): {r.get("error")}')


def _in_async(f):
    # the statement that called: a comprehension is part of it
    while f is not None and f.f_code.co_name in ('<listcomp>', '<genexpr>', '<setcomp>',
                                                 '<dictcomp>'):
        f = f.f_back
    return f is not None and bool(f.f_code.co_flags & (inspect.CO_COROUTINE
                                                        | inspect.CO_ASYNC_GENERATOR))


async def _acall(call):
    fut = asyncio.get_running_loop().create_future()
    _pending.append((call, fut))
    # let the other calls gathered with this one join the request
    await asyncio.sleep(0)
    if not fut.done():
        batch = _pending[:]
        del _pending[:]
        try:
            res = _roundtrip([c for c, _ in batch])
        except BaseException:
            for _, f in batch:
                if f is not fut and not f.done():
                    f.cancel()
            raise
        for (_, f), r in zip(batch, res):
            if not f.done():
                f.set_result(r)
    return fut.result()


def _make(d):
    name = d['name']
    ps = d.get('parameters') or {}
    props = ps.get('properties') or {}
    req = ps.get('required') or []
    params = []
    # optional parameters without a default show None: given None, they
    # are not sent (unless their schema takes null)
    unset = set()
    for optional in (False, True):
        for p, s in props.items():
            if (p not in req) != optional or not p.isidentifier() or keyword.iskeyword(p):
                continue
            dflt = inspect.Parameter.empty
            if optional:
                dflt = s.get('default') if isinstance(s, dict) else None
                if dflt is None and not _accepts_none(s):
                    unset.add(p)
            params.append(inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=dflt, annotation=_hint(s)))
    sig = inspect.Signature(params, return_annotation=_hint(d.get('returns')))

    def fn(*args, **kwargs):
        try:
            b = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f'{name}(): {e}') from None
        # only what was given: the function has its own defaults
        call = {'name': name, 'args': {k: v for k, v in b.arguments.items()
                                       if not (v is None and k in unset)}}
        if _in_async(sys._getframe(1)):
            return afn(call)
        r = _roundtrip([call])[0]
        e = _error(name, r)
        if e is not None:
            raise e
        return r.get('value')

    async def afn(call):
        r = await _acall(call)
        e = _error(name, r)
        if e is not None:
            raise e
        return r.get('value')

    # a traceback through them names the function
    fn.__code__ = fn.__code__.replace(co_name=name, co_qualname=name)
    afn.__code__ = afn.__code__.replace(co_name=name, co_qualname=name)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = 'kbox_functions'
    fn.__doc__ = d.get('description')
    fn.__signature__ = sig
    return fn


# in the user's namespace, as given names (user_ns_hidden: %who and kbox's
# list of what the code defined leave them out)
_ip = get_ipython()
for _d in _spec['functions']:
    _f = _make(_d)
    setattr(mod, _d['name'], _f)
    _ip.user_ns[_d['name']] = _f
    _ip.user_ns_hidden[_d['name']] = _f
