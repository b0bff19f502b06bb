"""track.py: where a call comes from in the user's training: the module path (forward by module
hooks, backward by the autograd node the forward created), the phase (fwd, bwd, opt) and the
iteration (a forward op after an optimizer step starts the next one)."""
import torch
import torch.optim.optimizer as _optim

PHASES = {"fwd": 0, "bwd": 1, "opt": 2}
META = "peat_layer"


class Tracker:
    def __init__(self, model=None):
        self.names = {}
        self.params = {}
        self.model_name = "model"
        if model is not None:
            self.model_name = type(model).__name__
            self.names = {m: n for n, m in model.named_modules()}
            self.params = {id(p): n for n, p in model.named_parameters()}
        self.stack = []
        self.in_opt = 0
        self.iter = 0
        self.last_phase = None
        self.handles = []
        self.on_new_iter = None
        self.on_opt_pre = self.on_opt_post = None  # callbacks(optimizer) around its step

    def __enter__(self):
        mm = torch.nn.modules.module
        om = _optim
        self.handles = [mm.register_module_forward_pre_hook(self._pre),
                        mm.register_module_forward_hook(self._post),
                        om.register_optimizer_step_pre_hook(self._opt_pre),
                        om.register_optimizer_step_post_hook(self._opt_post)]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.handles = []

    def _name(self, m):
        n = self.names.get(m)
        if n is None:
            n = type(m).__name__
        return n if n else self.model_name

    def _pre(self, m, args):
        # with a model, only its modules are layers (a module outside it is no layer of it)
        self.stack.append(None if self.names and m not in self.names else self._name(m))

    def _post(self, m, args, out):
        name = self.stack.pop() if self.stack else None
        if name is None:
            return
        # label the autograd nodes this module created (inner modules labelled theirs first)
        todo = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
        seen = 0
        while todo and seen < 100000:
            node = todo.pop()
            seen += 1
            if node is None or META in node.metadata:
                continue
            node.metadata[META] = name
            todo.extend(nf for nf, _ in node.next_functions if nf is not None)

    def _opt_pre(self, opt, args, kwargs):
        self.in_opt += 1
        if self.on_opt_pre:
            self.on_opt_pre(opt)

    def _opt_post(self, opt, args, kwargs):
        if self.on_opt_post:
            self.on_opt_post(opt)
        self.in_opt -= 1

    def where(self):
        """(phase, layer) of the call being made (layer None outside the model's modules);
        advances the iteration when a forward op follows an optimizer step."""
        if self.in_opt:
            phase = "opt"
        elif torch._C._current_graph_task_id() != -1:
            phase = "bwd"
        else:
            phase = "fwd"
        if phase == "fwd" and self.last_phase == "opt":
            self.iter += 1
            if self.on_new_iter:
                self.on_new_iter(self.iter)
        self.last_phase = phase
        if phase == "bwd":
            node = torch._C._current_autograd_node()
            return phase, node.metadata.get(META) if node is not None else None
        if phase == "opt":
            return phase, "optimizer"
        return phase, next((n for n in reversed(self.stack) if n), None)

    def param_name(self, p):
        return self.params.get(id(p), "param%d" % (id(p) % 10000))


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _tensors(y)]
    if isinstance(x, dict):
        return [t for y in x.values() for t in _tensors(y)]
    return []
