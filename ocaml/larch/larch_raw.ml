(* The raw externals of the Rust library (ocaml/larch-ocaml/src), one per [#[ocaml::func]].
   Every fallible external returns [('a, string) result] (larch's typed error text): no OCaml
   exception is ever raised from Rust. [Larch_context] is the API to use; see docs/ocaml.md. *)

type index

type context

type tree

type walker

type trace

type 'a res = ('a, string) result

external version : unit -> string = "larch_version"

external test_panic : unit -> unit res = "larch_test_panic"

(* Index, contexts, commits (src/index.rs). Hashes are 32 raw bytes. *)
external index_open : string -> bool -> string -> index res = "larch_index_open"

external index_close : index -> unit res = "larch_index_close"

external context_index : context -> index = "larch_context_index"

external context_init : index -> context res = "larch_context_init"

external exists : index -> string -> bool res = "larch_exists"

external checkout : index -> string -> context option res = "larch_checkout"

external head : index -> string option res = "larch_head"

external hash :
  context -> int64 -> string -> string -> string list option -> bytes res
  = "larch_hash"

external commit :
  context -> int64 -> string -> string -> string list option -> bytes res
  = "larch_commit"

external gc : index -> string -> unit res = "larch_gc"

external sync : index -> unit res = "larch_sync"

external export_snapshot : index -> string -> string -> unit res
  = "larch_export_snapshot"

external get_tree : context -> tree res = "larch_get_tree"

external set_tree : context -> tree -> context = "larch_set_tree"

(* Context operations (src/context.rs). *)
external find : context -> string list -> bytes option res = "larch_find"

external mem : context -> string list -> bool res = "larch_mem"

external mem_tree : context -> string list -> bool res = "larch_mem_tree"

external find_tree : context -> string list -> tree option res
  = "larch_find_tree"

external list :
  context -> int option -> int option -> string list -> (string * tree) array res
  = "larch_list"

external length : context -> string list -> int res = "larch_length"

(* The bool: consume the input context (its tree moves into the result; the input then refuses
   every use). *)
external add : context -> string list -> bytes -> bool -> context res = "larch_add"

external add_tree : context -> string list -> tree -> bool -> context res
  = "larch_add_tree"

external remove : context -> string list -> bool -> context res = "larch_remove"

external copy :
  context -> string list -> string list -> bool -> context option res
  = "larch_copy"

(* Trees (src/tree.rs). *)
external tree_find : tree -> string list -> bytes option res = "larch_tree_find"

external tree_mem : tree -> string list -> bool res = "larch_tree_mem"

external tree_mem_tree : tree -> string list -> bool res = "larch_tree_mem_tree"

external tree_find_tree : tree -> string list -> tree option res
  = "larch_tree_find_tree"

external tree_list :
  tree -> int option -> int option -> string list -> (string * tree) array res
  = "larch_tree_list"

external tree_length : tree -> string list -> int res = "larch_tree_length"

external tree_add : tree -> string list -> bytes -> tree res = "larch_tree_add"

external tree_add_tree : tree -> string list -> tree -> tree res
  = "larch_tree_add_tree"

external tree_remove : tree -> string list -> tree res = "larch_tree_remove"

external tree_empty : unit -> tree = "larch_tree_empty"

external tree_is_empty : tree -> bool res = "larch_tree_is_empty"

external tree_is_value : tree -> bool = "larch_tree_is_value"

external tree_to_value : tree -> bytes option res = "larch_tree_to_value"

external tree_of_value : bytes -> tree = "larch_tree_of_value"

external tree_hash : tree -> bytes res = "larch_tree_hash"

external tree_equal : tree -> tree -> bool res = "larch_tree_equal"

(* depth: (0 Eq | 1 Le | 2 Lt | 3 Ge | 4 Gt, n); the bool: sorted order. *)
external walker_make :
  tree -> (int * int) option -> string list -> bool -> walker res
  = "larch_walker_make"

external walker_next : walker -> (string array * tree) option res
  = "larch_walker_next"

(* Proofs (src/proof.rs): ops are (0 find | 1 mem | 2 mem_tree | 3 add | 4 remove, path, value);
   the int: the encoding (0 V1, 1 V2: Tree32; 2 V1, 3 V2: Tree2, verified only). *)
external produce_tree_proof :
  tree ->
  (int * string array * string) array ->
  int ->
  (bytes * bytes * bytes * (bytes option * bool) array) res
  = "larch_produce_tree_proof"

external verify_tree_proof :
  string ->
  int ->
  (int * string array * string) array ->
  (bytes * bytes * (bytes option * bool) array) res = "larch_verify_tree_proof"

(* Octez's merkle_tree_v2: tree, Raw_context (else Hole), key, encoding; the encoded proof. *)
external merkle_tree_v2 : tree -> bool -> string array -> int -> bytes res
  = "larch_merkle_tree_v2"

(* Stream proofs: the same arguments and results as the tree proofs'. *)
external produce_stream_proof :
  tree ->
  (int * string array * string) array ->
  int ->
  (bytes * bytes * bytes * (bytes option * bool) array) res
  = "larch_produce_stream_proof"

external verify_stream_proof :
  string ->
  int ->
  (int * string array * string) array ->
  (bytes * bytes * (bytes option * bool) array) res = "larch_verify_stream_proof"

(* Traces (src/trace.rs): for replaying a trace through the context API. *)
external trace_open : string -> trace res = "larch_trace_open"

external trace_next :
  trace ->
  (int
  * int
  * int
  * bool
  * string list
  * string list
  * bytes
  * bool
  * bytes
  * int64
  * bytes
  * bytes list)
  option
  res = "larch_trace_next"

(* The next operations (at most the count), encoded in one byte string (empty at the end):
   decoded by Support.replay (ocaml/support/support.ml); the encoding is in src/trace.rs. *)
external trace_next_batch : trace -> int -> bytes res = "larch_trace_next_batch"

external hash_to_b58 : string -> string res = "larch_hash_to_b58"

external hash_of_text : string -> string res = "larch_hash_of_text"
