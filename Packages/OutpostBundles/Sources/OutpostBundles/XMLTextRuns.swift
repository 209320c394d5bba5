import Clibxml2

/// Stands between libxml2's parser and the schema's SAX plug (`xmlSchemaSAXPlug`), joining a long run of
/// pieces of text into few calls, and passing every other event on as it comes, after the text before it.
///
/// Why: the parser hands a value over in pieces (one per predefined entity, character reference and
/// CDATA section, and the text between), and libxml2 2.9's validator appends each piece to the value so
/// far with `xmlStrncat`, which measures the whole value again: a 1 MB value spelled as a million
/// `&amp;` took 14.5 s to import, quadratic in its pieces (attack 127, F3).
///
/// The first `directPieces` pieces of a run go on as they come, untouched: nearly every value is one
/// piece, and copying each (with a Swift call per event) made an XML import 8% slower. Later pieces of
/// the run are held and go on together before the next event, at the end of each chunk the reader
/// pushes (`flush()`), or once `limit` bytes are held, so the reader's own bounds on a value still apply
/// as the document arrives and the validator sees at most a few pieces per chunk of a run.
///
/// A held run holding a CDATA section goes on as one: in a field (simple content) the validator takes
/// text and CDATA alike as the value; between elements (element-only content) it refuses a CDATA section
/// whatever it holds, and text other than white space, so a run is refused joined exactly when one of
/// its pieces was. Joined only by kind, text and CDATA in turn were still half a million pieces.
///
/// The state lives at one address, handed to the parser as its context: no reference counting and no
/// exclusivity checks on each event.
final class XMLTextRuns {
    /// The most bytes held before they go on.
    static let limit = 64 * 1024
    /// Pieces of a run that go on as they come.
    static let directPieces = 8

    fileprivate struct State {
        let plug: xmlSAXHandler
        let plugContext: UnsafeMutableRawPointer?
        let buffer: UnsafeMutablePointer<xmlChar>
        var held = 0
        var holdsCDATA = false
        var piecesInRun = 0
        var joining = true

        /// The text held, passed on as one piece (an empty CDATA section when it held only empty ones).
        mutating func flush() {
            guard held > 0 || holdsCDATA else { return }
            let count = held
            held = 0
            let callback = holdsCDATA ? plug.cdataBlock : plug.characters
            holdsCDATA = false
            callback?(plugContext, buffer, Int32(count))
        }

        /// Before any other event: the text held goes on, and a new run begins.
        mutating func endRun() {
            piecesInRun = 0
            flush()
        }

        mutating func add(_ text: UnsafePointer<xmlChar>?, count: Int32, cdata: Bool) {
            if !joining || (held == 0 && !holdsCDATA && piecesInRun < XMLTextRuns.directPieces) {
                piecesInRun += 1
                (cdata ? plug.cdataBlock : plug.characters)?(plugContext, text, count)
                return
            }
            // An empty piece adds no text, but an empty CDATA section between elements is one the
            // validator refuses (dropped, such a document was read): held, it marks the run as holding
            // one. Passed on after the text held, each flushed the run: a million of them between
            // letters were a million pieces again (attack 129, F1).
            guard let text, count > 0 else {
                holdsCDATA = holdsCDATA || cdata
                return
            }
            var start = text, left = Int(count)
            while left > 0 {
                let taken = min(left, XMLTextRuns.limit - held)
                (buffer + held).update(from: start, count: taken)
                held += taken
                holdsCDATA = holdsCDATA || cdata
                start += taken
                left -= taken
                if held == XMLTextRuns.limit { flush() }
            }
        }
    }

    private let state: UnsafeMutablePointer<State>

    /// Joins text for the plug whose callbacks are `plug`, called with `context`.
    init(plug: xmlSAXHandler, context: UnsafeMutableRawPointer?) {
        let buffer = UnsafeMutablePointer<xmlChar>.allocate(capacity: Self.limit)
        state = .allocate(capacity: 1)
        state.initialize(to: State(plug: plug, plugContext: context, buffer: buffer))
    }

    deinit {
        state.pointee.buffer.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// The parser's context for `handler()`'s callbacks; valid while this lives.
    var context: UnsafeMutableRawPointer { UnsafeMutableRawPointer(state) }

    /// The text held, passed on as one piece: at the end of each chunk, before its errors are settled.
    func flush() {
        state.pointee.flush()
    }

    /// Passes each piece on as it comes from now on, after the text held. For the document's end: the
    /// parser holds back at most a few hundred bytes of a chunk for the end, and the errors the end
    /// brings (a document cut off) must come after that text, as they did unjoined.
    func passOnFromNow() {
        state.pointee.flush()
        state.pointee.joining = false
    }

    /// Whether the plug asks for no event but those `handler()` passes on: a libxml2 whose plug takes
    /// another (an entity declaration, say) is given the plug itself, as before.
    static func canStandBefore(_ plug: xmlSAXHandler) -> Bool {
        let others: [Bool] = [
            plug.isStandalone == nil, plug.hasInternalSubset == nil, plug.hasExternalSubset == nil, plug.resolveEntity == nil,
            plug.getEntity == nil, plug.entityDecl == nil, plug.notationDecl == nil, plug.attributeDecl == nil,
            plug.elementDecl == nil, plug.unparsedEntityDecl == nil, plug.setDocumentLocator == nil, plug.startDocument == nil,
            plug.endDocument == nil, plug.startElement == nil, plug.endElement == nil, plug.getParameterEntity == nil,
            plug.externalSubset == nil, plug.serror == nil,
        ]
        return plug.initialized == XML_SAX2_MAGIC && !others.contains(false)
    }

    /// The callbacks for the parser, whose context is `context`: text is joined, and each other event
    /// the plug takes goes on after the text before it. An event the plug does not take is not asked for.
    func handler() -> xmlSAXHandler {
        var handler = xmlSAXHandler()
        handler.initialized = XML_SAX2_MAGIC
        let plug = state.pointee.plug
        handler.characters = { context, text, count in runState(context).pointee.add(text, count: count, cdata: false) }
        if plug.cdataBlock != nil {
            handler.cdataBlock = { context, text, count in runState(context).pointee.add(text, count: count, cdata: true) }
        }
        if plug.startElementNs != nil {
            handler.startElementNs = { context, name, prefix, uri, namespaceCount, namespaces, attributeCount, defaulted, attributes in
                let run = endedRun(context)
                run.pointee.plug.startElementNs?(
                    run.pointee.plugContext, name, prefix, uri, namespaceCount, namespaces, attributeCount, defaulted, attributes)
            }
        }
        if plug.endElementNs != nil {
            handler.endElementNs = { context, name, prefix, uri in
                let run = endedRun(context)
                run.pointee.plug.endElementNs?(run.pointee.plugContext, name, prefix, uri)
            }
        }
        if plug.ignorableWhitespace != nil {
            handler.ignorableWhitespace = { context, text, count in
                let run = endedRun(context)
                run.pointee.plug.ignorableWhitespace?(run.pointee.plugContext, text, count)
            }
        }
        if plug.reference != nil {
            handler.reference = { context, name in
                let run = endedRun(context)
                run.pointee.plug.reference?(run.pointee.plugContext, name)
            }
        }
        if plug.internalSubset != nil {
            handler.internalSubset = { context, name, externalID, systemID in
                let run = endedRun(context)
                run.pointee.plug.internalSubset?(run.pointee.plugContext, name, externalID, systemID)
            }
        }
        if plug.comment != nil {
            handler.comment = { context, text in
                let run = endedRun(context)
                run.pointee.plug.comment?(run.pointee.plugContext, text)
            }
        }
        if plug.processingInstruction != nil {
            handler.processingInstruction = { context, target, data in
                let run = endedRun(context)
                run.pointee.plug.processingInstruction?(run.pointee.plugContext, target, data)
            }
        }
        return handler
    }
}

private func runState(_ context: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLTextRuns.State> {
    context!.assumingMemoryBound(to: XMLTextRuns.State.self)
}

/// The state, its held text passed on: for an event other than text, which comes after it.
private func endedRun(_ context: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLTextRuns.State> {
    let run = runState(context)
    run.pointee.endRun()
    return run
}
